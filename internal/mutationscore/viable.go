package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
)

// stringConcats returns the positions ("line:column") of the + operators
// in path that join strings. Gremlins' ARITHMETIC_BASE turns + into -,
// which does not compile on strings: such a mutant is not viable. It
// reports one NOT COVERED, though, when the + sits in a package-level
// declaration (the store's SQL text is built that way), because Go's
// coverage gives declarations outside functions no block and gremlins
// never tries to build it. A + joins strings when its chain of + operands
// holds a string literal: Go's + needs operands of one type, and a string
// literal can only be a string.
func stringConcats(path string) (map[string]bool, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if b, ok := n.(*ast.BinaryExpr); ok && b.Op == token.ADD && hasStringLit(b) {
			p := fset.Position(b.OpPos)
			out[posKey(p.Line, p.Column)] = true
		}
		return true
	})
	return out, nil
}

// hasStringLit reports whether e, through parentheses and + operators,
// has a string literal operand.
func hasStringLit(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return hasStringLit(e.X)
	case *ast.BasicLit:
		return e.Kind == token.STRING
	case *ast.BinaryExpr:
		return e.Op == token.ADD && (hasStringLit(e.X) || hasStringLit(e.Y))
	}
	return false
}

func posKey(line, col int) string { return fmt.Sprintf("%d:%d", line, col) }
