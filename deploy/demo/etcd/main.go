// Command etcd is a development helper for `make pro-demo`: a single-node
// etcd embedded from go.etcd.io/etcd/server/v3, listening on loopback, so
// the demo needs no system etcd package. Not for production use.
//
//	go run ./deploy/demo/etcd --listen 127.0.0.1:2379 --data-dir /tmp/etcd
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:2379", "client address (loopback)")
	peer := flag.String("peer", "127.0.0.1:2380", "peer address (loopback)")
	dir := flag.String("data-dir", "", "data directory (required)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir is required")
		os.Exit(2)
	}
	client, err := url.Parse("http://" + *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: --listen:", err)
		os.Exit(2)
	}
	peerURL, err := url.Parse("http://" + *peer)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd: --peer:", err)
		os.Exit(2)
	}
	cfg := embed.NewConfig()
	cfg.Name = "vigil-demo"
	cfg.Dir = *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peerURL}, []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcd:", err)
		os.Exit(1)
	}
	defer e.Close()
	<-e.Server.ReadyNotify()
	fmt.Println("etcd ready on", client)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcd:", err)
	}
}
