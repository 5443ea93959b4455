package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/lmittmann/tint"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// bindConfig layers every flag of cmd (docs/design.md §9): a flag given on the
// command line wins, then VIGIL_<FLAG_NAME> (dashes become underscores),
// then the --config YAML file (same names as keys, nested sections become
// dotted names such as recovery.agent-lost-threshold), then the default.
// Values from env or file go through the flag's own parser, so a bad value
// fails the same way and names the flag and its source.
func bindConfig(cmd *cobra.Command) error {
	v := viper.New()
	v.SetEnvPrefix("VIGIL")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	path, _ := cmd.Flags().GetString("config")
	if path == "" {
		path = os.Getenv("VIGIL_CONFIG")
	}
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return usageError("config %s: %v", path, err)
		}
		if err := checkConfigKeys(cmd.Root(), path, v.AllKeys()); err != nil {
			return err
		}
	}
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if firstErr != nil || f.Changed || f.Name == "config" || f.Name == "help" {
			return
		}
		keys := []string{f.Name}
		for _, section := range f.Annotations[configSection] {
			keys = append(keys, section+"."+f.Name)
		}
		source, val, ok := lookup(v, f.Name, keys)
		if !ok {
			return
		}
		if err := setFlag(f, val); err != nil {
			firstErr = usageError("--%s (from %s): %s", f.Name, source, describeValueError(f, fmt.Sprint(val), err))
			return
		}
		_ = cmd.Flags().SetAnnotation(f.Name, sourceAnnotation, []string{source})
	})
	return firstErr
}

// lookup finds a flag's value in env (VIGIL_<FLAG_NAME>) first, then in
// the file under any of keys.
func lookup(v *viper.Viper, name string, keys []string) (source string, val any, ok bool) {
	env := "VIGIL_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
	if s, set := os.LookupEnv(env); set {
		return env, s, true
	}
	for _, k := range keys {
		if v.InConfig(k) {
			return "config file key " + k, v.Get(k), true
		}
	}
	return "", nil, false
}

// setFlag sets f from an env string or a YAML value (lists join with commas).
func setFlag(f *pflag.Flag, val any) error {
	if list, ok := val.([]any); ok {
		parts := make([]string, len(list))
		for i, p := range list {
			parts[i] = fmt.Sprint(p)
		}
		val = strings.Join(parts, ",")
	}
	return f.Value.Set(fmt.Sprint(val))
}

// newLogger builds the process logger from --log-format and --log-level:
// tint for terminals (or "text"), slog.JSONHandler for "json" (docs/design.md §10).
func newLogger(cmd *cobra.Command, w io.Writer) (*slog.Logger, error) {
	format, _ := cmd.Flags().GetString("log-format")
	levelName, _ := cmd.Flags().GetString("log-level")
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, usageError("--log-level: %q must be debug, info, warn or error", levelName)
	}
	switch format {
	case "auto":
		if f, ok := w.(*os.File); ok && isTerminal(f) {
			format = "text"
		} else {
			format = "json"
		}
	case "text", "json":
	default:
		return nil, usageError("--log-format: %q must be auto, text or json", format)
	}
	if format == "text" {
		// Colour only on a terminal: a log file never holds ANSI escapes.
		f, ok := w.(*os.File)
		noColor := !ok || !isTerminal(f)
		return slog.New(tint.NewHandler(w, &tint.Options{Level: level, TimeFormat: "15:04:05.000", NoColor: noColor})), nil
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// isTerminal reports whether f is a character device (a TTY).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// runE builds a RunE for a long-running command: validate its flags (exit
// 2 on error), build the logger, then run.
func runE(validate func() error, run func(ctx context.Context, log *slog.Logger) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := validate(); err != nil {
			return err
		}
		log, err := newLogger(cmd, os.Stderr)
		if err != nil {
			return err
		}
		return run(cmd.Context(), log)
	}
}
