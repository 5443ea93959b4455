package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// jsonBytes is v as JSON, to tell whether watched data changed.
func jsonBytes(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// watchOpts are --watch and --watch-interval of runs list and runs show.
type watchOpts struct {
	on    bool
	every time.Duration
}

// addWatchFlags adds --watch (-w) and --watch-interval to cmd.
func addWatchFlags(cmd *cobra.Command, w *watchOpts) {
	cmd.Flags().BoolVarP(&w.on, "watch", "w", false, "keep polling and redraw whenever the data changes; Ctrl-C ends")
	cmd.Flags().DurationVar(&w.every, "watch-interval", 2*time.Second, "with --watch: how often to poll (≥ 100ms)")
}

// validate checks --watch-interval.
func (w *watchOpts) validate() error {
	if w.on && w.every < 100*time.Millisecond {
		return usageError("--watch-interval: %s must be at least 100ms", w.every)
	}
	return nil
}

// frame is one poll of a watched command: what to draw, the data it was
// drawn from (a redraw happens only when that changes), and whether the
// watch is over (a run that ended).
type frame struct {
	text []byte
	data []byte
	done bool
}

// watch polls with poll every interval and writes each frame whose data
// changed: on a terminal the screen is cleared first, elsewhere frames
// follow one another. It ends without error when ctx is cancelled (Ctrl-C)
// or a frame is done. A transient error (transport, 5xx) is reported on
// stderr and polled through; any other error ends the watch.
func watch(ctx context.Context, out, stderr io.Writer, every time.Duration, poll func(context.Context) (frame, error)) error {
	f, isFile := out.(*os.File)
	clear := isFile && isTerminal(f)
	var last []byte
	failing := false
	for {
		fr, err := poll(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && retryablePollError(err):
			if !failing {
				fmt.Fprintf(stderr, "vigil: %v (still watching)\n", err)
			}
			failing = true
		case err != nil:
			return err
		default:
			failing = false
			if last == nil || !bytes.Equal(fr.data, last) {
				first := last == nil
				last = fr.data
				if clear {
					fmt.Fprint(out, "\x1b[H\x1b[2J")
				} else if !first {
					fmt.Fprintln(out) // a blank line between frames
				}
				if _, err := out.Write(fr.text); err != nil {
					return err
				}
			}
			if fr.done {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}
