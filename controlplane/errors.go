package controlplane

import (
	"errors"
	"fmt"
)

// ErrConfig marks an error of a Config that Start refused before serving:
// a field that breaks a rule, or a value a part it assembles (scheduler,
// API, elector, store options) rejected. The binary exits 2 on it, as on a
// bad flag.
var ErrConfig = errors.New("invalid control plane config")

// FieldError is a Config field that breaks a rule, or a start-up step that
// failed on that field's value (a busy Listen address, an unreadable DAGs
// folder). Field is the Config field's Go path, e.g. "DataDir" or
// "Pro.Endpoints"; Named words the error for a caller that knows the field
// by another name, such as the flag its user typed.
type FieldError struct {
	Field string
	// Err is the cause, if any (errors.Is and As see through).
	Err  error
	text func(name string) string
}

// fieldError returns a FieldError reading "<name>: <rule>", "<name>:
// <cause>" (rule empty) or "<name>: <rule>: <cause>".
func fieldError(field string, cause error, rule string, args ...any) *FieldError {
	rule = fmt.Sprintf(rule, args...)
	return &FieldError{Field: field, Err: cause, text: func(name string) string {
		switch {
		case cause == nil:
			return name + ": " + rule
		case rule == "":
			return name + ": " + cause.Error()
		}
		return name + ": " + rule + ": " + cause.Error()
	}}
}

// Error names the Config field.
func (e *FieldError) Error() string { return e.Named(e.Field) }

// Named is the error's text with the field called name.
func (e *FieldError) Named(name string) string { return e.text(name) }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// within renames the FieldErrors in err's tree as fields of the struct
// field prefix (Database{Wait} inside Config: "DatabaseWait").
func within(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		fe.Field = prefix + fe.Field
	}
	return err
}

// configError marks err as an ErrConfig.
type configError struct{ err error }

func (e *configError) Error() string        { return e.err.Error() }
func (e *configError) Unwrap() error        { return e.err }
func (e *configError) Is(target error) bool { return target == ErrConfig }

func invalid(err error) error { return &configError{err: err} }
