package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Tests of the deployment assets under deploy/: the
// example config files in deploy/config, the systemd units in
// deploy/systemd and (deploy_kubernetes_test.go) the Kubernetes manifests.
// Each one is checked against the real vigil command tree and the real
// config loader, so a renamed flag or a mistyped key fails here.

// deployDir is the repository's deploy/ directory, seen from cmd/vigil.
const deployDir = "../../deploy"

// loadCommandLine runs what `vigil <args...>` does before its RunE: it
// finds the subcommand in the real command tree, parses the rest of args
// with that command's flag set (an unknown flag or a bad value fails), and
// runs the root's PersistentPreRunE, the config loader (bindConfig), which
// reads --config and VIGIL_* into the flags through each flag's parser.
// It returns the command, whose Flags() then hold the loaded values.
func loadCommandLine(t *testing.T, args []string) (*cobra.Command, error) {
	t.Helper()
	root := newRootCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return nil, err
	}
	if cmd == root {
		t.Fatalf("%q names no vigil subcommand", args)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return cmd, err
	}
	if pos := cmd.Flags().Args(); len(pos) > 0 {
		if err := cmd.ValidateArgs(pos); err != nil {
			return cmd, err
		}
	}
	return cmd, root.PersistentPreRunE(cmd, cmd.Flags().Args())
}

// unknownConfigKeys lists the keys of the YAML config file at path that
// name no flag of cmd, neither directly (listen) nor under the section
// the loader accepts for it (recovery.agent-lost-threshold). bindConfig
// reads only the keys it knows and ignores the others, so without this a
// mistyped key in an example would load "successfully" and do nothing.
// The mapping is bindConfig's own: flag names, plus the configSection
// annotation of each flag.
func unknownConfigKeys(t *testing.T, cmd *cobra.Command, path string) []string {
	t.Helper()
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	known := map[string]bool{}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" {
			return // bindConfig never reads these from the file
		}
		known[f.Name] = true
		for _, section := range f.Annotations[configSection] {
			known[section+"."+f.Name] = true
		}
	})
	var unknown []string
	for _, k := range v.AllKeys() {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// loadConfigFile loads path exactly as `vigil <command> --config path`
// would, with extra flags after it, and fails the test on any error or
// unknown key. It returns the loaded command.
func loadConfigFile(t *testing.T, command, path string, extra ...string) *cobra.Command {
	t.Helper()
	args := append([]string{command, "--config", path}, extra...)
	cmd, err := loadCommandLine(t, args)
	if err != nil {
		t.Fatalf("vigil %s: %v", strings.Join(args, " "), err)
	}
	if unknown := unknownConfigKeys(t, cmd, path); len(unknown) > 0 {
		t.Fatalf("%s: keys that are no flag of vigil %s: %v", path, command, unknown)
	}
	return cmd
}

// exampleConfigs maps each file in deploy/config to the command that reads it.
var exampleConfigs = map[string]string{
	"server.yaml": "server",
	"agent.yaml":  "agent",
	"lite.yaml":   "lite",
}

// TestDeployConfigExamples loads every example config file in
// deploy/config with the real config loader of the command it is for.
func TestDeployConfigExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(deployDir, "config", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("deploy/config holds no files")
	}
	for _, path := range files {
		name := filepath.Base(path)
		command, ok := exampleConfigs[name]
		if !ok {
			t.Errorf("%s: no command is known for this example; add it to exampleConfigs", path)
			continue
		}
		t.Run(name, func(t *testing.T) {
			cmd := loadConfigFile(t, command, path)
			// The loader applied the file: a setting that differs from
			// its default in every example shows it.
			if got, _ := cmd.Flags().GetString("log-format"); got != "json" {
				t.Errorf("log-format = %q after loading %s, want json (the file was not applied)", got, path)
			}
		})
	}
	for name := range exampleConfigs {
		if _, err := os.Stat(filepath.Join(deployDir, "config", name)); err != nil {
			t.Errorf("deploy/config/%s: %v", name, err)
		}
	}
}

// TestDeployConfigCheckCatchesTypos shows that the checks above fail on a
// mistyped key and on a bad value, so a green TestDeployConfigExamples
// means something.
func TestDeployConfigCheckCatchesTypos(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join(deployDir, "config", "server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	typo := filepath.Join(dir, "typo.yaml")
	body := strings.Replace(string(orig), "heartbeat-interval:", "heartbeat-intervall:", 1)
	body = strings.Replace(body, "  sweep-interval:", "  sweep-intervals:", 1)
	if err := os.WriteFile(typo, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, err := loadCommandLine(t, []string{"server", "--config", typo})
	switch {
	case err == nil:
		// The loader accepts unknown keys (Vigil must refuse
		// them); the key check of loadConfigFile must catch them.
		got := unknownConfigKeys(t, cmd, typo)
		if want := []string{"heartbeat-intervall", "recovery.sweep-intervals"}; !slices.Equal(got, want) {
			t.Fatalf("unknown keys of %s = %v, want %v", typo, got, want)
		}
	case !strings.Contains(err.Error(), "heartbeat-intervall") && !strings.Contains(err.Error(), "sweep-intervals"):
		t.Fatalf("loading %s: %v names neither mistyped key", typo, err)
	}

	bad := filepath.Join(dir, "bad.yaml")
	body = strings.Replace(string(orig), "election-ttl: 10s", "election-ttl: ten", 1)
	if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCommandLine(t, []string{"server", "--config", bad}); err == nil || !strings.Contains(err.Error(), "election-ttl") {
		t.Fatalf("loading %s: %v, want an error naming election-ttl", bad, err)
	}
}

// unitFile is a parsed systemd unit: section → key → values in order
// (a key such as LoadCredential= may repeat).
type unitFile map[string]map[string][]string

// parseUnitFile reads a systemd unit file: [Section] headers, Key=Value
// lines, # and ; comments, and lines continued with a trailing backslash.
func parseUnitFile(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	var pending string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == ';') {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		line, pending = pending+line, ""
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not a Key=Value line in a section: %q", path, n, line)
		}
		u[section][strings.TrimSpace(key)] = append(u[section][strings.TrimSpace(key)], strings.TrimSpace(val))
	}
	return u
}

// one returns the single value of key in [Service], failing if it is
// missing or repeated.
func (u unitFile) one(t *testing.T, key string) string {
	t.Helper()
	vals := u["Service"][key]
	if len(vals) != 1 {
		t.Fatalf("[Service] %s: %d values %q, want exactly one", key, len(vals), vals)
	}
	return vals[0]
}

// taskUserCaps is CapabilityBoundingSet= of an agent unit whose tasks run
// as --task-user: what switching to it takes, nothing more.
const taskUserCaps = "CAP_SETUID CAP_SETGID CAP_KILL CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER"

// TestDeploySystemdUnits checks deploy/systemd: each unit runs a real
// vigil subcommand with real flags (parsed and loaded by the real command
// tree and config loader, its --config mapped to the example in
// deploy/config), reads its token from a LoadCredential= file, restarts on
// failure and keeps the hardening options. When systemd-analyze is
// installed, `systemd-analyze verify` must accept each unit without a
// warning.
func TestDeploySystemdUnits(t *testing.T) {
	units := map[string]struct {
		command   string
		tokenFlag []string // flags that must read a credential file
		killMode  string
	}{
		"vigil-server.service": {"server", []string{"agent-token-file", "operator-token-file"}, "control-group"},
		// The agent drains and kills its task process groups itself; see
		// the KillMode comment in the unit.
		"vigil-agent.service": {"agent", []string{"token-file"}, "mixed"},
	}
	files, err := filepath.Glob(filepath.Join(deployDir, "systemd", "*.service"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(units) {
		t.Fatalf("deploy/systemd holds %v, want the %d units this test knows", files, len(units))
	}
	for _, path := range files {
		name := filepath.Base(path)
		want, ok := units[name]
		if !ok {
			t.Fatalf("%s: unknown unit", path)
		}
		t.Run(name, func(t *testing.T) {
			u := parseUnitFile(t, path)
			fields := strings.Fields(u.one(t, "ExecStart"))
			if filepath.Base(fields[0]) != "vigil" || fields[1] != want.command {
				t.Fatalf("ExecStart runs %q, want vigil %s", fields[:2], want.command)
			}
			args := slices.Clone(fields[1:])
			// The unit's --config must be an example of deploy/config.
			i := slices.Index(args, "--config")
			if i < 0 || i+1 >= len(args) {
				t.Fatalf("ExecStart has no --config FILE: %q", fields)
			}
			example := filepath.Join(deployDir, "config", filepath.Base(args[i+1]))
			if exampleConfigs[filepath.Base(example)] != want.command {
				t.Fatalf("--config %s: deploy/config has no example for vigil %s by that name", args[i+1], want.command)
			}
			extra := append(slices.Clone(args[1:i]), args[i+2:]...)
			cmd := loadConfigFile(t, args[0], example, extra...)

			// Tokens come from LoadCredential= files, never from a flag value.
			creds := map[string]bool{}
			for _, lc := range u["Service"]["LoadCredential"] {
				id, src, _ := strings.Cut(lc, ":")
				if !strings.HasPrefix(src, "/etc/vigil/credentials/") {
					t.Errorf("LoadCredential=%s: keep secrets in root-owned /etc/vigil/credentials/", lc)
				}
				creds[id] = true
			}
			for _, flag := range want.tokenFlag {
				val := cmd.Flags().Lookup(flag).Value.String()
				id, ok := strings.CutPrefix(val, "${CREDENTIALS_DIRECTORY}/")
				if !ok || !creds[id] {
					t.Errorf("--%s %q: want ${CREDENTIALS_DIRECTORY}/ID of a LoadCredential= (have %v)", flag, val, creds)
				}
			}
			for _, secret := range []string{"token", "agent-token", "operator-token", "etcd-password"} {
				if f := cmd.Flags().Lookup(secret); f != nil && f.Value.String() != "" {
					t.Errorf("--%s is given as a value; use --%s-file", secret, secret)
				}
			}

			// An agent whose tasks run as --task-user runs as root with
			// exactly the capabilities that switch takes; any other
			// service runs as a dedicated user with none.
			taskUser := ""
			if f := cmd.Flags().Lookup("task-user"); f != nil {
				taskUser = f.Value.String()
			}
			caps := ""
			if taskUser != "" {
				caps = taskUserCaps
			}
			for key, val := range map[string]string{
				"Restart": "on-failure", "NoNewPrivileges": "yes", "ProtectSystem": "strict",
				"ProtectHome": "yes", "PrivateTmp": "yes", "CapabilityBoundingSet": caps,
				"KillMode": want.killMode,
			} {
				if got := u.one(t, key); got != val {
					t.Errorf("%s=%s, want %s=%s", key, got, key, val)
				}
			}
			for _, key := range []string{"RestartSec", "RestrictAddressFamilies", "TimeoutStopSec"} {
				u.one(t, key)
			}
			switch user := u["Service"]["User"]; {
			case taskUser != "":
				if len(user) > 0 && user[0] != "root" {
					t.Errorf("User=%s with --task-user %s: the agent must be root to switch users", user[0], taskUser)
				}
				if taskUser == "root" || taskUser == "nobody" {
					t.Errorf("--task-user %s: want a dedicated task user", taskUser)
				}
			case len(user) != 1 || user[0] == "root" || user[0] == "nobody":
				t.Errorf("User=%v: want a dedicated service user", user)
			}
			if want.command == "agent" {
				// systemd must not SIGKILL the agent before its drain ends.
				stop, err := time.ParseDuration(strings.ReplaceAll(u.one(t, "TimeoutStopSec"), "min", "m"))
				if err != nil {
					t.Fatalf("TimeoutStopSec: %v", err)
				}
				drain, _ := cmd.Flags().GetDuration("drain-timeout")
				grace, _ := cmd.Flags().GetDuration("kill-grace")
				if stop <= drain+grace {
					t.Errorf("TimeoutStopSec %s must exceed drain-timeout %s + kill-grace %s", stop, drain, grace)
				}
			}
			verifyUnit(t, path, fields[0])
		})
	}
}

// verifyUnit runs `systemd-analyze verify` on a copy of the unit whose
// ExecStart binary is replaced by this test binary (verify requires an
// executable), and fails on any output: systemd only warns, with exit 0,
// about an unknown key or a bad value.
func verifyUnit(t *testing.T, path, binary string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: skipping systemd-analyze verify")
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(cp, bytes.ReplaceAll(data, []byte("ExecStart="+binary), []byte("ExecStart="+self)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", cp).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}
