package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryCommandHasAnExample walks the command
// tree: every visible command's help has an Example: section, and every
// vigil command line in it names a real command and flags it has.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := newRootCmd()
	var walk func(*cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		seen++
		path := c.CommandPath()
		if assert.NotEmpty(t, c.Example, "%s has no Example", path) {
			var help strings.Builder
			c.SetOut(&help)
			require.NoError(t, c.Help())
			assert.Contains(t, help.String(), "Examples:\n", "%s --help shows the examples", path)
			lines := exampleCommands(c.Example)
			assert.NotEmpty(t, lines, "%s: the example runs no vigil command", path)
			mentionsSelf := false
			for _, args := range lines {
				cmd, rest, err := newRootCmd().Find(args[1:])
				if !assert.NoError(t, err, "%s example %q", path, args) {
					continue
				}
				mentionsSelf = mentionsSelf || cmd.CommandPath() == path || strings.HasPrefix(cmd.CommandPath(), path+" ")
				assert.NoError(t, cmd.ParseFlags(rest), "%s example %q: flags", path, args)
			}
			assert.True(t, mentionsSelf, "%s: the example never runs %s", path, path)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	assert.Greater(t, seen, 25, "the walk reached the whole tree")
}

// exampleCommands are the vigil command lines of an example, each split
// into words: continuation lines joined, anything after a pipe dropped,
// comments skipped.
func exampleCommands(example string) [][]string {
	var out [][]string
	joined := strings.ReplaceAll(example, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "vigil ") && line != "vigil" {
			continue
		}
		line, _, _ = strings.Cut(line, "|")
		out = append(out, shellWords(line))
	}
	return out
}

// shellWords splits s at spaces outside double or single quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
