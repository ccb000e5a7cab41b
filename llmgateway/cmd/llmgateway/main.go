// Command llmgateway serves an OpenAI- and Anthropic-compatible HTTP API in front
// of llmclient: limits, retries, breakers, failover, stream guards, budgets and a
// cache for services in any language. See docs/gateway.md.
//
//	cd llmgateway && go install ./cmd/llmgateway
//	llmgateway -config sample.yaml
//
// SIGHUP and any change of the file reload the configuration (an invalid one is
// refused and the running one kept); SIGINT and SIGTERM shut down gracefully,
// waiting for requests in flight, open streams included, and a second one cuts
// those left. The command exits 0 after a clean drain and 1 when it cut requests.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/llmclient/llmclient/llmgateway"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// procs is the GOMAXPROCS the configuration asks for, or 0 to leave Go's: when it
// says nothing or the GOMAXPROCS environment variable is set.
func procs(cfg *llmgateway.Config, getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return 0
	}
	return cfg.Procs
}

const usage = `Usage: llmgateway [-config file] [-watch interval] [-check]

llmgateway serves an OpenAI- and Anthropic-compatible HTTP API in front of llmclient
(docs/gateway.md). SIGHUP, a change of the file (checked every -watch interval) and
POST /admin/reload reload the configuration; an invalid file is refused, logged, and
changes nothing. SIGINT and SIGTERM close the listeners and wait for the requests in
flight, open streams included, up to shutdown_grace; a second one cuts those left.
The exit status is 0 after a clean drain, 1 when requests were cut or a start failed.

`

func run() error {
	// From the start a SIGHUP waits in sig instead of ending the process with Go's
	// default action: sent while the gateway starts, it is a reload once it serves; with
	// -check it is ignored. SIGINT and SIGTERM keep their default until the gateway
	// serves: they end a start that hangs (a store that does not answer).
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	file := flag.String("config", "llmgateway.yaml", "configuration file (YAML or JSON)")
	check := flag.Bool("check", false, "validate the configuration as a start would, print \"configuration ok\" and exit")
	watch := flag.Duration("watch", 2*time.Second, "how often to check the file for changes (0: only SIGHUP and /admin/reload)")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), usage)
		flag.PrintDefaults()
	}
	flag.Parse()
	cfg, err := llmgateway.LoadFile(*file, nil)
	if err != nil {
		return err
	}
	if *check {
		// Building the gateway finds what only New checks (a pricing file it cannot
		// read, options the Client refuses); it connects to nothing.
		g, err := llmgateway.New(cfg)
		if err != nil {
			return err
		}
		if err := g.Shutdown(context.Background()); err != nil {
			return err
		}
		fmt.Println("configuration ok")
		return nil
	}
	if n := procs(cfg, os.Getenv); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	g, err := llmgateway.New(cfg)
	if err != nil {
		return err
	}
	api, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	var admin net.Listener
	if cfg.Admin.Listen != "" {
		if admin, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
			return err
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	drained := make(chan error, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sig:
				if s == syscall.SIGHUP {
					_ = g.ReloadFile(*file)
					continue
				}
				stop()
				// A second SIGINT or SIGTERM cuts the drain short.
				cut, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- g.Shutdown(cut) }()
				for {
					select {
					case err := <-done:
						cancel()
						drained <- err
						return
					case s := <-sig:
						if s != syscall.SIGHUP {
							cancel()
						}
					}
				}
			}
		}
	}()
	if *watch > 0 {
		go g.WatchFile(ctx, *file, *watch)
	}
	fmt.Fprintf(os.Stderr, "llmgateway: serving on %s", api.Addr())
	if admin != nil {
		fmt.Fprintf(os.Stderr, ", admin on %s", admin.Addr())
	}
	fmt.Fprintln(os.Stderr)
	// Serve returns as soon as shutdown begins; the drain of the requests in flight
	// ends when Shutdown returns.
	err = g.Serve(api, admin)
	if ctx.Err() != nil {
		// A drain that did not end cleanly (requests cut when shutdown_grace ran out or
		// at a second signal, or what the stores held back not sent) exits 1.
		if derr := <-drained; derr != nil {
			if err == nil {
				return fmt.Errorf("llmgateway: shutdown: %w", derr)
			}
			fmt.Fprintln(os.Stderr, "llmgateway: shutdown:", derr)
		}
	}
	return err
}
