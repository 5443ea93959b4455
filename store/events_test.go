package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/store"
	"github.com/vigil-sched/vigil/store/storetest"
)

// eventsFixture is a store on a private database with two runs of one DAG
// and a direct connection to add events to them.
type eventsFixture struct {
	st         *store.Store
	conn       *pgx.Conn
	runA, runB int64
}

func newEventsFixture(t *testing.T) *eventsFixture {
	t.Helper()
	ctx := t.Context()
	url := storetest.DB(t)
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	spec, err := dag.Parse([]byte("dag_id: ev\ntasks:\n  - id: a\n    command: [\"true\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ApplyDAG(ctx, spec); err != nil {
		t.Fatal(err)
	}
	f := &eventsFixture{st: st, conn: conn}
	for _, id := range []*int64{&f.runA, &f.runB} {
		run, err := st.TriggerRun(ctx, "ev") // records one run_queued event
		if err != nil {
			t.Fatal(err)
		}
		*id = run.ID
	}
	return f
}

// add records n events on each of runIDs, interleaved so that no run's
// ids are contiguous.
func (f *eventsFixture) add(t *testing.T, n int, runIDs ...int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		for _, id := range runIDs {
			if _, err := f.conn.Exec(t.Context(), `INSERT INTO events (run_id, kind, message) VALUES ($1, 'test', 'm')`, id); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// pages reads run runID's timeline from the start with page size limit,
// returning each page's ids and the cursors it followed.
func (f *eventsFixture) pages(t *testing.T, runID int64, limit int) (pages [][]int64, cursors []int64) {
	t.Helper()
	after := int64(0)
	for {
		page, err := f.st.RunEventsPage(t.Context(), runID, after, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > limit {
			t.Fatalf("page of %d events over limit %d", len(page.Events), limit)
		}
		ids := []int64{}
		for _, e := range page.Events {
			if e.RunID != runID {
				t.Fatalf("event %d of run %d on run %d's page", e.ID, e.RunID, runID)
			}
			ids = append(ids, e.ID)
		}
		pages = append(pages, ids)
		if page.NextCursor == nil {
			return pages, cursors
		}
		if len(ids) == 0 || *page.NextCursor != ids[len(ids)-1] {
			t.Fatalf("next_cursor %d is not the page's last id (page %v)", *page.NextCursor, ids)
		}
		cursors = append(cursors, *page.NextCursor)
		after = *page.NextCursor
		if len(pages) > 100 {
			t.Fatal("more than 100 pages")
		}
	}
}

// joinPages is the ids of pages in order.
func joinPages(pages [][]int64) []int64 {
	var all []int64
	for _, p := range pages {
		all = append(all, p...)
	}
	return all
}

func TestRunEventsPageBoundaries(t *testing.T) {
	t.Parallel()
	f := newEventsFixture(t)
	f.add(t, 5, f.runA, f.runB) // 6 events per run: run_queued + 5

	all, err := f.st.RunEvents(t.Context(), f.runA, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 6 || all[0].Kind != "run_queued" {
		t.Fatalf("RunEvents: %d events, first %+v; want 6 starting with run_queued", len(all), all[0])
	}
	want := make([]int64, len(all))
	for i, e := range all {
		want[i] = e.ID
		if i > 0 && e.ID <= want[i-1] {
			t.Fatalf("RunEvents not in id order: %v", want[:i+1])
		}
	}

	for _, c := range []struct {
		name  string
		limit int
		sizes []int
	}{
		// An exact multiple of the limit ends on a full page with no
		// cursor: the extra row read tells there is nothing after it.
		{"exact multiple", 3, []int{3, 3}},
		{"exact single page", 6, []int{6}},
		{"one short of a page", 7, []int{6}},
		{"remainder", 4, []int{4, 2}},
		{"one per page", 1, []int{1, 1, 1, 1, 1, 1}},
		{"max", store.EventsPageMax, []int{6}},
	} {
		pages, cursors := f.pages(t, f.runA, c.limit)
		var sizes []int
		for _, p := range pages {
			sizes = append(sizes, len(p))
		}
		if !slices.Equal(sizes, c.sizes) || !slices.Equal(joinPages(pages), want) {
			t.Errorf("%s (limit %d): pages %v, want sizes %v and ids %v", c.name, c.limit, pages, c.sizes, want)
		}
		if len(cursors) != len(c.sizes)-1 {
			t.Errorf("%s: cursors %v, want %d", c.name, cursors, len(c.sizes)-1)
		}
	}

	// The cursor is exclusive and need not be an id of this run.
	page, err := f.st.RunEventsPage(t.Context(), f.runA, want[2], 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{page.Events[0].ID, page.Events[1].ID}; !slices.Equal(got, want[3:5]) || page.NextCursor == nil || *page.NextCursor != want[4] {
		t.Errorf("after %d limit 2: %v next %v, want %v next %d", want[2], got, page.NextCursor, want[3:5], want[4])
	}
	page, err = f.st.RunEventsPage(t.Context(), f.runA, want[2]+1, 10) // runB's event between runA's
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 3 || page.Events[0].ID != want[3] {
		t.Errorf("after %d (a run B id): %+v, want ids %v", want[2]+1, page.Events, want[3:])
	}
}

func TestRunEventsEmptyPage(t *testing.T) {
	t.Parallel()
	f := newEventsFixture(t)
	all, err := f.st.RunEvents(t.Context(), f.runA, 0)
	if err != nil || len(all) != 1 {
		t.Fatalf("RunEvents: %v, %v; want the run_queued event", all, err)
	}
	// Past the last event: an empty, non-nil page with no cursor, which
	// the API sends as {"events":[],"next_cursor":null}.
	page, err := f.st.RunEventsPage(t.Context(), f.runA, all[0].ID, 500)
	if err != nil {
		t.Fatal(err)
	}
	if page.Events == nil || len(page.Events) != 0 || page.NextCursor != nil {
		t.Errorf("empty page is %+v, want a non-nil empty Events and a nil NextCursor", page)
	}
	all, err = f.st.RunEvents(t.Context(), f.runA, all[0].ID)
	if err != nil || len(all) != 0 {
		t.Errorf("RunEvents past the end: %v, %v; want none", all, err)
	}
}

func TestRunEventsUnknownRunIsNotFound(t *testing.T) {
	t.Parallel()
	f := newEventsFixture(t)
	const missing = 424242
	if _, err := f.st.RunEventsPage(t.Context(), missing, 0, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunEventsPage of run %d: %v, want ErrNotFound", missing, err)
	}
	if _, err := f.st.RunEvents(t.Context(), missing, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RunEvents of run %d: %v, want ErrNotFound", missing, err)
	}
}

func TestRunEventsPageRejectsBadArguments(t *testing.T) {
	t.Parallel()
	f := newEventsFixture(t)
	for _, c := range []struct {
		after int64
		limit int
		want  string
	}{
		{0, 0, "limit 0 must be in 1..5000"},
		{0, store.EventsPageMax + 1, "limit 5001 must be in 1..5000"},
		{-1, 10, "afterID -1 must not be negative"},
	} {
		_, err := f.st.RunEventsPage(t.Context(), f.runA, c.after, c.limit)
		if err == nil || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("after %d limit %d: %v, want an error containing %q", c.after, c.limit, err, c.want)
		}
	}
}

// TestEventsHaveOneIndex: an event is written with one btree entry, its
// primary key (run_id, id), which every read of events uses (a run's
// timeline page, its late completions, the log and late checks, retention);
// a TI writes two events, so a second index on events cost two entries a
// TI (migration 029, docs/performance.md "One index for events").
func TestEventsHaveOneIndex(t *testing.T) {
	f := newEventsFixture(t)
	rows, err := f.conn.Query(t.Context(), `SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'events'`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) != 1 || !strings.Contains(defs[0], "UNIQUE INDEX events_pkey ON public.events USING btree (run_id, id)") {
		t.Fatalf("events' indexes = %q, want only the primary key (run_id, id)", defs)
	}
}

// TestMigration029RoundTrip: migration 029 keeps every event both ways,
// and its down migration restores the key on id and events_run_idx.
func TestMigration029RoundTrip(t *testing.T) {
	f := newEventsFixture(t)
	ctx := t.Context()
	if _, err := f.conn.Exec(ctx, `INSERT INTO events (run_id, kind, message) VALUES ($1, 'run_cancelled', 'a'), ($2, 'run_cancelled', 'b')`,
		f.runA, f.runB); err != nil {
		t.Fatal(err)
	}
	indexes := func() string {
		var s string
		if err := f.conn.QueryRow(ctx, `SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'events'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	url := f.conn.Config().ConnString()
	f.st.Close()
	for _, step := range []struct {
		version int32
		want    string
	}{{28, "events_pkey,events_run_idx"}, {29, "events_pkey"}} {
		if err := store.MigrateToForTest(ctx, url, step.version); err != nil {
			t.Fatalf("migrate to %d: %v", step.version, err)
		}
		var n int
		if err := f.conn.QueryRow(ctx, `SELECT count(*) FROM events WHERE run_id IN ($1, $2)`, f.runA, f.runB).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if got := indexes(); got != step.want || n < 2 {
			t.Fatalf("at version %d: indexes %s (want %s), %d events of the two runs (want at least 2)", step.version, got, step.want, n)
		}
	}
}
