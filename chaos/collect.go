package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/agent"
	"github.com/vigil-sched/vigil/api/protocol"
)

// fenceHistorySQL records every committed move of the leader fence in
// chaos_fence_history, from a trigger in the moving transaction, so the
// row's commit timestamp is the move's. It is the harness's own
// instrument, not part of Vigil's schema.
const fenceHistorySQL = `
CREATE TABLE IF NOT EXISTS chaos_fence_history (
    id     bigserial PRIMARY KEY,
    epoch  bigint NOT NULL,
    holder text
);
CREATE OR REPLACE FUNCTION chaos_fence_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_fence_history (epoch, holder) VALUES (NEW.epoch, NEW.holder);
    RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS chaos_fence_moved ON leader_fence;
CREATE TRIGGER chaos_fence_moved AFTER UPDATE OF epoch ON leader_fence
    FOR EACH ROW WHEN (OLD.epoch IS DISTINCT FROM NEW.epoch) EXECUTE FUNCTION chaos_fence_moved();
INSERT INTO chaos_fence_history (epoch, holder) SELECT epoch, holder FROM leader_fence WHERE epoch > 0;
`

// leaderWritesSQL records, from a statement trigger on every table of
// Vigil's schema but the fence itself, each transaction that a leader
// wrote in: its epoch (vigil.epoch, which the fence check sets for the
// transaction, store/fence.go) and the first table it wrote. A leader
// session (application_name vigil-leader) that writes without a fence
// check is recorded with no epoch. The row's commit timestamp is the
// leader transaction's. Like chaos_fence_history it is the harness's own
// instrument: every leader write, not only events, is judged by
// invariant 3.
const leaderWritesSQL = `
CREATE TABLE IF NOT EXISTS chaos_leader_writes (
    txid  bigint PRIMARY KEY,
    epoch bigint,
    tbl   text NOT NULL
);
CREATE OR REPLACE FUNCTION chaos_leader_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE e text := coalesce(current_setting('vigil.epoch', true), '');
BEGIN
    IF e <> '' OR current_setting('application_name') = 'vigil-leader' THEN
        INSERT INTO chaos_leader_writes (txid, epoch, tbl) VALUES (txid_current(), nullif(e, '')::bigint, TG_TABLE_NAME)
        ON CONFLICT (txid) DO NOTHING;
    END IF;
    RETURN NULL;
END $$;
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT tablename FROM pg_tables
              WHERE schemaname = current_schema() AND tablename <> 'leader_fence' AND tablename NOT LIKE 'chaos\_%'
    LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS chaos_leader_write ON %I', t);
        EXECUTE format('CREATE TRIGGER chaos_leader_write AFTER INSERT OR UPDATE OR DELETE ON %I '
                       'FOR EACH STATEMENT EXECUTE FUNCTION chaos_leader_write()', t);
    END LOOP;
END $$;
`

func execSQL(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// installFenceHistory installs the fence trigger and the leader write
// triggers once the replicas have migrated the schema (the fence may already have moved: that first move
// is recorded by the INSERT).
func installFenceHistory(ctx context.Context, url string) error {
	if err := execSQL(ctx, url, fenceHistorySQL); err != nil {
		return fmt.Errorf("install the fence history trigger: %w", err)
	}
	if err := execSQL(ctx, url, leaderWritesSQL); err != nil {
		return fmt.Errorf("install the leader write triggers: %w", err)
	}
	return nil
}

// droppedRe recognises a gap marker's text (agent/outbox.go).
var droppedRe = regexp.MustCompile(`\((\d+) dropped\) ---$`)

// collect reads Vigil's rows into h.
func collect(ctx context.Context, url string, h *History) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(ctx, `
		SELECT id, run_id, coalesce(ti_id, 0), kind, coalesce(attempt_id::text, ''), coalesce(try_number, 0),
		       coalesce(epoch, 0), created_at, pg_xact_commit_timestamp(xmin)
		  FROM events ORDER BY id`)
	h.Events, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.RunID, &e.TIID, &e.Kind, &e.AttemptID, &e.Try, &e.Epoch, &e.Created, &e.Committed)
		return e, err
	})
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	rows, _ = conn.Query(ctx, `
		SELECT id, run_id, task_id, state, coalesce(reason, ''), coalesce(attempt_id::text, ''), try_number
		  FROM task_instances ORDER BY id`)
	h.TIs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TaskInstance, error) {
		var t TaskInstance
		err := r.Scan(&t.ID, &t.RunID, &t.TaskID, &t.State, &t.Reason, &t.AttemptID, &t.Try)
		return t, err
	})
	if err != nil {
		return fmt.Errorf("read task instances: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT id, dag_id, state, queued_at, end_date, run_type, logical_date FROM runs ORDER BY id`)
	h.Runs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (RunRow, error) {
		var run RunRow
		var end, logical *time.Time
		err := r.Scan(&run.ID, &run.DAG, &run.State, &run.Created, &end, &run.Type, &logical)
		if end != nil {
			run.Ended = *end
		}
		if logical != nil {
			run.LogicalDate = *logical
		}
		return run, err
	})
	if err != nil {
		return fmt.Errorf("read runs: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT epoch, coalesce(holder, ''), pg_xact_commit_timestamp(xmin)
		FROM chaos_fence_history ORDER BY id`)
	h.Fence, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (FenceChange, error) {
		var f FenceChange
		var ts *time.Time
		err := r.Scan(&f.Epoch, &f.Holder, &ts)
		if ts != nil {
			f.Committed = *ts
		}
		return f, err
	})
	if err != nil {
		return fmt.Errorf("read the fence history: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT txid, coalesce(epoch, 0), tbl, pg_xact_commit_timestamp(xmin)
		FROM chaos_leader_writes ORDER BY txid`)
	h.LeaderWrites, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (LeaderWrite, error) {
		var w LeaderWrite
		var ts *time.Time
		err := r.Scan(&w.TxID, &w.Epoch, &w.Table, &ts)
		if ts != nil {
			w.Committed = *ts
		}
		return w, err
	})
	if err != nil {
		return fmt.Errorf("read the leader writes: %w", err)
	}
	return collectLogs(ctx, conn, h)
}

func collectLogs(ctx context.Context, conn *pgx.Conn, h *History) error {
	h.Logs = map[string]AttemptLogs{}
	rows, err := conn.Query(ctx, `SELECT attempt_id::text, stream, ts, line, dropped FROM task_logs ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read logs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, stream, line string
		var ts time.Time
		var dropped int
		if err := rows.Scan(&id, &stream, &ts, &line, &dropped); err != nil {
			return err
		}
		l := h.Logs[id]
		if stream == protocol.StreamSystem {
			// The marker's own count of this attempt's lost lines
			// (migration 015); its text gives the agent's, all attempts'.
			l.Dropped += dropped
			if droppedRe.MatchString(line) {
				l.Markers = append(l.Markers, ts)
			}
		} else {
			if l.First.IsZero() || ts.Before(l.First) {
				l.First = ts
			}
			l.Received++
			if !strings.HasPrefix(line, "line ") && len(l.Odd) < 3 {
				l.Odd = append(l.Odd, stream+": "+line)
			}
		}
		h.Logs[id] = l
	}
	return rows.Err()
}

// graceRestartMsg is the stall detector's log message (scheduler/stall.go).
const graceRestartMsg = "agent-lost grace restarted: agents could not report meanwhile"

// collectGraces reads every replica's log (server-<id>-<n>.log in dir)
// for grace restarts.
func collectGraces(dir string) ([]GraceRestart, error) {
	var out []GraceRestart
	err := scanLogs(dir, "server-*.log", graceRestartMsg, func(name string, line []byte) {
		var rec struct {
			Msg        string    `json:"msg"`
			GraceStart time.Time `json:"grace_start"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == graceRestartMsg {
			id := strings.Split(strings.TrimPrefix(name, "server-"), "-")[0]
			out = append(out, GraceRestart{Replica: id, At: rec.GraceStart})
		}
	})
	return out, err
}

// collectAcks reads every agent's log (agent-<instance>.log in dir, at
// debug level) for the heartbeats the control plane acknowledged.
func collectAcks(dir string) ([]HeartbeatAck, error) {
	var out []HeartbeatAck
	err := scanLogs(dir, "agent-*.log", agent.HeartbeatAckMsg, func(name string, line []byte) {
		var rec struct {
			Msg        string    `json:"msg"`
			ServerTime time.Time `json:"server_time"`
			Attempts   []string  `json:"attempts"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg == agent.HeartbeatAckMsg && len(rec.Attempts) > 0 {
			inst := strings.TrimSuffix(strings.TrimPrefix(name, "agent-"), ".log")
			out = append(out, HeartbeatAck{Instance: inst, At: rec.ServerTime, Attempts: rec.Attempts})
		}
	})
	return out, err
}

// scanLogs calls fn with each line containing marker of every file in
// dir matching pattern, and the file's base name.
func scanLogs(dir, pattern, marker string, fn func(name string, line []byte)) error {
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return err
	}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if bytes.Contains(sc.Bytes(), []byte(marker)) {
				fn(filepath.Base(path), sc.Bytes())
			}
		}
		err = sc.Err()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
