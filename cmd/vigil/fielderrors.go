package main

import (
	"errors"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vigil-sched/vigil/api/client"
	"github.com/vigil-sched/vigil/reaper"
)

// Field errors of the domain packages name fields, never flags; the CLI
// names them as the user gave them: the flag typed, the VIGIL_… variable,
// or the config file key (bindConfig records which).

// sourceAnnotation records, on a flag that bindConfig set from the
// environment or the config file, where its value came from.
const sourceAnnotation = "vigil/value-source"

// flagSource names where flag name of fs got its value: "--name" when
// typed (or left at its default), else "--name (from SOURCE)" with the
// variable or file key bindConfig recorded, e.g. "--agent-lost-threshold
// (from VIGIL_AGENT_LOST_THRESHOLD)" (docs/configuration.md).
func flagSource(fs *pflag.FlagSet, name string) string {
	f := fs.Lookup(name)
	if f == nil || f.Changed {
		return "--" + name
	}
	if src := f.Annotations[sourceAnnotation]; len(src) > 0 {
		return "--" + name + " (from " + src[0] + ")"
	}
	return "--" + name
}

// thresholdFlags maps reaper.FieldError fields to the server's flags.
var thresholdFlags = map[string]string{
	reaper.FieldAgentLost:    "agent-lost-threshold",
	reaper.FieldDispatchLost: "dispatch-lost-threshold",
	reaper.FieldOrphan:       "orphan-threshold",
}

// nameThresholdFields rewrites the reaper.FieldErrors in err to name the
// flag, variable or file key each value came from (flagSource); other
// errors are returned as they are.
func nameThresholdFields(err error, fs *pflag.FlagSet) error {
	return reaper.RenameFields(err, func(field string) string {
		name, ok := thresholdFlags[field]
		if !ok || fs == nil {
			return field
		}
		return flagSource(fs, name)
	})
}

// thresholdsSetFlags maps the JSON fields of PUT /v1/thresholds to the
// flags of `vigil thresholds set`.
var thresholdsSetFlags = map[string]string{"agent_lost": "agent-lost", "dispatch_lost": "dispatch-lost", "orphan": "orphan"}

// serverRejectedThresholds turns a 400 reply of PUT /v1/thresholds into a
// usage error (exit 2, as for a value rejected locally) whose lines name
// the flags the user typed instead of the API's JSON fields.
func serverRejectedThresholds(err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 {
		return err
	}
	lines := strings.Split(ae.Message, "\n")
	for i, line := range lines {
		for field, flag := range thresholdsSetFlags {
			if rest, ok := strings.CutPrefix(line, field+": "); ok {
				lines[i] = "--" + flag + ": " + rest
			}
		}
	}
	return usageError("%s", strings.Join(lines, "\n"))
}
