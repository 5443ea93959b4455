package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples are the Example: sections of `vigil ... --help`, by command
// path. applyExamples sets them; TestEveryCommandHasAnExample keeps every
// visible command covered and every example naming its own command.
var examples = map[string]string{
	"vigil": `  # Start Lite (API, scheduler and two agents) with the example DAGs
  vigil lite --dags examples/

  # Trigger a run of the example pipeline, wait for it, then read its timeline
  vigil runs trigger pipeline --wait
  vigil runs events 1`,
	"vigil lite": `  # A private PostgreSQL under .vigil, two in-process agents, the API on :8080
  vigil lite --dags examples/

  # An existing database, another port, no in-process agents
  vigil lite --database-url postgres://vigil@db/vigil --listen 127.0.0.1:8081 --agents 0

  # Settings from a file (flag > VIGIL_* > file > default)
  vigil lite --config vigil.yaml`,
	"vigil server": `  # One Pro replica; run three behind a load balancer
  vigil server --database-url postgres://vigil@db/vigil --etcd-endpoints etcd-0:2379,etcd-1:2379,etcd-2:2379 \
    --agent-token-file /etc/vigil/agent.token --operator-token-file /etc/vigil/operator.token`,
	"vigil agent": `  # An agent with two tags, failing over between two replicas
  vigil agent --server http://vigil-0:8080,http://vigil-1:8080 --token-file /etc/vigil/agent.token \
    --tags gpu,linux --capacity 8

  # Stopped with SIGTERM, an agent drains, then deregisters
  vigil agent --server http://vigil:8080 --token-file agent.token --drain-timeout 10m`,
	"vigil agents": `  vigil agents list`,
	"vigil agents list": `  vigil agents list
  vigil agents list -o wide

  # Names of the agents, one a line
  vigil agents list -o name`,
	"vigil dags": `  vigil dags apply examples/
  vigil dags list`,
	"vigil dags apply": `  # Every *.yaml and *.yml in a directory; nothing is applied if one is bad
  vigil dags apply dags/

  # Single files
  vigil dags apply etl.yaml report.yml`,
	"vigil dags list": `  vigil dags list
  vigil dags list -o yaml`,
	"vigil runs clear": `  # What a clear of run 7 would do: every task that failed, and what they blocked
  vigil runs clear 7 --dry-run

  # Re-run transform and everything after it, without asking
  vigil runs clear 7 --task transform --downstream --yes --reason "source fixed"`,
	"vigil tasks": `  vigil tasks mark 7 transform success --yes`,
	"vigil tasks mark": `  # transform failed for a reason fixed by hand: let its dependents run
  vigil tasks mark 7 transform success --reason "sum computed by hand" --yes

  # Stop transform and what follows it
  vigil tasks mark 7 transform failed --downstream --yes`,
	"vigil dags backfill": `  # One backfill run per slot of etl's schedule in January 2026 (at most 1000)
  vigil dags backfill etl --from 2026-01-01T00:00:00Z --to 2026-01-31T00:00:00Z

  # Again: nothing new is created; the reply says how many already existed
  vigil dags backfill etl --from 2026-01-01T00:00:00Z --to 2026-01-31T00:00:00Z -o json`,
	"vigil dags next": `  # The next five slots of etl's schedule
  vigil dags next etl

  # The next 24, as JSON
  vigil dags next etl --count 24 -o json`,
	"vigil dags pause": `  # Stop the schedule of etl creating runs; runs already created go on
  vigil dags pause etl`,
	"vigil dags unpause": `  # Let the schedule of etl create runs again, from its next slot
  vigil dags unpause etl
  vigil dags unpause etl -o json`,
	"vigil runs": `  vigil runs trigger etl --wait
  vigil runs list --state running
  vigil runs show 12`,
	"vigil runs trigger": `  # Queue a run and print its id
  vigil runs trigger etl

  # Wait for it: exit 0 on success, 3 when it ends failed or cancelled
  vigil runs trigger etl --wait --timeout 30m

  # With parameters (tasks see VIGIL_PARAM_REGION, VIGIL_PARAM_LIMIT)
  vigil runs trigger export --conf region=us --conf limit=500
  vigil runs trigger export --conf-file params.yaml`,
	"vigil runs list": `  vigil runs list
  vigil runs list --dag etl --state failed --limit 20 -o wide

  # Redraw as runs change, until Ctrl-C
  vigil runs list --watch

  # Cancel every running run of a DAG
  vigil runs list --dag etl --state running -o name | xargs -n1 vigil runs cancel`,
	"vigil runs show": `  vigil runs show 12

  # Redraw as its task instances change, until the run ends
  vigil runs show 12 --watch
  vigil runs show 12 -o json | jq '.task_instances[] | select(.state == "failed")'`,
	"vigil runs events": `  vigil runs events 12

  # Only what happened after event 40
  vigil runs events 12 --after 40 -o json`,
	"vigil runs outputs": `  # What each task of run 12 wrote to $VIGIL_OUTPUT
  vigil runs outputs 12

  # One task's, whole values as JSON
  vigil runs outputs 12 --task count-words -o json`,
	"vigil runs cancel": `  vigil runs cancel 12`,
	"vigil logs": `  # Every try of task extract of run 12
  vigil logs 12 extract

  # Only try 2, following until the task ends
  vigil logs 12 extract --try 2 --follow`,
	"vigil at-risk": `  # Work a reaper will act on if nothing changes, with the time left
  vigil at-risk

  # The same for a script, with the reaper's outcome in words
  vigil at-risk -o json`,
	"vigil reap": `  # What the reapers would do now, without writing
  vigil reap --dry-run

  # Force a sweep now (on a follower, the leader is asked)
  vigil reap`,
	"vigil thresholds": `  vigil thresholds get
  vigil thresholds set --agent-lost 2m
  vigil thresholds reset`,
	"vigil thresholds get": `  vigil thresholds get
  vigil thresholds get -o json`,
	"vigil thresholds set": `  # Every replica follows; rejected values change nothing (exit 2)
  vigil thresholds set --agent-lost 2m --orphan 10m`,
	"vigil thresholds reset": `  vigil thresholds reset`,
	"vigil secrets": `  vigil secrets set db_password --from-file ./db_password.txt
  vigil secrets list
  vigil secrets delete db_password`,
	"vigil secrets set": `  # From a file, taken as is (keeps the value out of shell history)
  vigil secrets set db_password --from-file ./db_password.txt

  # From stdin; one trailing newline is dropped
  printf %s "$DB_PASSWORD" | vigil secrets set db_password`,
	"vigil secrets list": `  vigil secrets list
  vigil secrets list -o json`,
	"vigil secrets delete": `  vigil secrets delete db_password`,
	"vigil webhooks": `  vigil webhooks set oncall --url https://alerts.example.com/vigil --secret-file ./oncall.secret
  vigil webhooks test oncall
  vigil webhooks list`,
	"vigil webhooks set": `  # Signed: each body carries Vigil-Signature: sha256=<HMAC of the body>
  vigil webhooks set oncall --url https://alerts.example.com/vigil --secret-file ./oncall.secret

  # A Slack incoming webhook: posts {"text": ...}
  vigil webhooks set ops-slack --url https://hooks.slack.com/services/T000/B000/XXXX --format slack`,
	"vigil webhooks list":   `  vigil webhooks list`,
	"vigil webhooks delete": `  vigil webhooks delete ops-slack`,
	"vigil webhooks test": `  # Posts a test payload now; exit 1 unless the receiver answers 2xx
  vigil webhooks test oncall`,
	"vigil notifications": `  vigil notifications list --state pending`,
	"vigil notifications list": `  vigil notifications list
  vigil notifications list --state dead -o wide
  vigil notifications list --run 4711`,
	"vigil pools": `  vigil pools set warehouse --slots 2
  vigil pools list
  vigil pools delete warehouse`,
	"vigil pools set": `  # At most 2 tasks naming pool warehouse run at once, across every DAG
  vigil pools set warehouse --slots 2 --description "the warehouse's connection limit"
  # Shrink it: running tasks finish; none starts until fewer than 1 run
  vigil pools set warehouse --slots 1`,
	"vigil pools list": `  vigil pools list
  vigil pools list -o json`,
	"vigil pools delete": `  vigil pools delete warehouse`,
	"vigil dags delete": `  vigil dags delete pools-report
  # Without asking (scripts)
  vigil dags delete pools-report --yes`,
	"vigil whoami": `  vigil whoami
  VIGIL_TOKEN="$(cat ~/.vigil-token)" vigil whoami -o json`,
	"vigil audit": `  vigil audit list --actor alice --since 24h`,
	"vigil audit list": `  vigil audit list
  # One identity's calls of the last day
  vigil audit list --actor alice --since 24h
  # Everything done to run 42, with request ids and client addresses
  vigil audit list --target runs/42 -o wide`,
	"vigil migrate": `  vigil migrate status --database-url postgres://vigil@db/vigil
  vigil migrate up --database-url postgres://vigil@db/vigil`,
	"vigil migrate up":     `  vigil migrate up --database-url postgres://vigil@db/vigil`,
	"vigil migrate status": `  vigil migrate status --database-url postgres://vigil@db/vigil`,
	"vigil fence":          `  vigil fence show --database-url postgres://vigil@db/vigil`,
	"vigil fence show": `  vigil fence show --database-url postgres://vigil@db/vigil
  vigil fence show --database-url postgres://vigil@db/vigil -o json`,
	"vigil fence reset": `  # Only when leadership is blocked by the fence; the reset is audited.
  # Through the API (the admin role):
  vigil fence reset --reason "etcd restored from backup" --yes
  # On the database, when no replica runs:
  vigil fence reset --database-url postgres://vigil@db/vigil --reason "etcd restored from backup" --yes`,
	"vigil completion": `  # Completes commands, flags, DAG ids, run ids, task ids and states
  vigil completion bash > ~/.vigil-completion.bash
  echo 'source ~/.vigil-completion.bash' >> ~/.bashrc`,
	"vigil completion bash":       `  vigil completion bash > /etc/bash_completion.d/vigil`,
	"vigil completion zsh":        `  vigil completion zsh > "${fpath[1]}/_vigil"`,
	"vigil completion fish":       `  vigil completion fish > ~/.config/fish/completions/vigil.fish`,
	"vigil completion powershell": `  vigil completion powershell | Out-String | Invoke-Expression`,
	"vigil version": `  vigil version
  vigil version -o json

  # This binary only, without asking the server
  vigil version --client`,
}

// applyExamples sets the Example of every command under root from
// examples.
func applyExamples(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if ex, ok := examples[c.CommandPath()]; ok {
			c.Example = strings.TrimRight(ex, "\n")
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
