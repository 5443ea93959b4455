package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzConfigFile fuzzes the config loader: bindConfig reading
// a --config YAML file for `vigil lite`, `vigil server` or `vigil agent`,
// each value going through its flag's parser. Whatever the file holds,
// loading never panics, and a refusal is a usage error (exit 2) that names
// the file or the flag. `go test` runs the seeds; `make fuzz` runs longer.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []struct {
		cmd  uint8
		yaml string
	}{
		{0, "listen: 127.0.0.1:8080\nagents: 4\nheartbeat-interval: 15s\n"},
		{0, "recovery:\n  agent-lost-threshold: 90s\n  sweep-interval: 10s\nretention:\n  retention-runs: 720h\n"},
		{0, "agents: 99\n"},
		{0, "agents: [1, 2]\nagent-tags: [gpu, cpu]\n"},
		{0, "recovery: 5\n"},
		{0, "heartbeat-interval: forever\n"},
		{0, "leader:\n  leader-lock-timeout: 2s\n"},
		{1, "etcd-endpoints: [a:2379, b:2379]\nelection-ttl: 3s\nagent-token-file: /nonexistent\n"},
		{1, "tls-cert-file: x.pem\n"},
		{2, "server: [http://a:8080, http://b:8080]\ncapacity: 2\ntags: gpu\n"},
		{2, "capacity: -1\nclaim-wait: 1m\n"},
		{0, ""},
		{0, "{{{"},
		{0, "- a\n- b\n"},
		{0, "\x00\xff"},
		{1, "a: &x [*x]\n"},
	} {
		f.Add(seed.cmd, []byte(seed.yaml))
	}
	names := []string{"lite", "server", "agent"}
	f.Fuzz(func(t *testing.T, which uint8, yaml []byte) {
		path := filepath.Join(t.TempDir(), "vigil.yaml")
		if err := os.WriteFile(path, yaml, 0o600); err != nil {
			t.Fatal(err)
		}
		root := newRootCmd()
		cmd, _, err := root.Find([]string{names[int(which)%len(names)]})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		err = bindConfig(cmd)
		if err == nil {
			return
		}
		var ec *exitCodeError
		if !errors.As(err, &ec) || ec.code != exitUsage {
			t.Fatalf("config %q: %v is not a usage error", yaml, err)
		}
		if msg := err.Error(); !strings.Contains(msg, path) && !strings.Contains(msg, "--") {
			t.Fatalf("config %q: %q names neither the file nor a flag", yaml, msg)
		}
	})
}
