// Command postgres is a development helper for `make pro-demo`: it starts
// a private PostgreSQL cluster from the machine's binaries with
// store/pgcluster (the same code as Lite), prints its URL, and stops it on
// SIGTERM. Not for production use.
//
//	go run ./deploy/demo/postgres --dir /tmp/pg --port 15432
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vigil-sched/vigil/store/pgcluster"
)

func main() {
	dir := flag.String("dir", "", "cluster directory (required; reused when it exists)")
	port := flag.Int("port", 0, "loopback port (0 picks a free one)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "postgres: --dir is required")
		os.Exit(2)
	}
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, pgcluster.Config{Dir: *dir, Port: *port, Ephemeral: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(1)
	}
	fmt.Println(c.URL("vigil"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Stop(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "postgres: stop:", err)
		os.Exit(1)
	}
}
