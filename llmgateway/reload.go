package llmgateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/llmclient/llmclient"
)

// ReloadFile reads file (secrets from the same environment as the running
// configuration) and applies it with Reload. An invalid file changes nothing.
func (g *Gateway) ReloadFile(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		err = fmt.Errorf("llmgateway: %w", err)
		g.log.Error("reload refused", "file", file, "err", err.Error())
		return err
	}
	return g.reloadData(file, data)
}

// reloadData is ReloadFile of data, read from file.
func (g *Gateway) reloadData(file string, data []byte) error {
	g.seeData(file, data)
	cfg, err := parseFile(file, data, g.state.Load().cfg.env)
	if err != nil {
		g.log.Error("reload refused", "file", file, "err", err.Error())
		return err
	}
	return g.Reload(cfg)
}

// see notes the file cfg was read from, if any, as seen.
func (g *Gateway) see(cfg *Config) {
	if cfg.source != "" {
		g.seeData(cfg.source, cfg.raw)
	}
}

func (g *Gateway) seeData(file string, data []byte) {
	g.seenMu.Lock()
	g.seenFile, g.seenData = file, data
	g.seenMu.Unlock()
}

// seen says whether data is what file held when it was last read.
func (g *Gateway) seen(file string, data []byte) bool {
	g.seenMu.Lock()
	defer g.seenMu.Unlock()
	return g.seenFile == file && bytes.Equal(g.seenData, data)
}

// Reload applies a new configuration while requests are in flight, keeping the
// state of everything it does not change. Upstream keys, limits, timeouts and
// weights and group members go through Client.Update (breakers, cooldowns, limiter
// debts and statistics stay); tenants, their keys and models, the request size limit,
// the request timeout and the log level are swapped at once for requests that start
// after it. A change that needs a new Client (adding or removing an upstream,
// budgets, retry, breaker, redis, cache, listeners...) is refused with an error
// naming each such field, and then nothing changes at all; so does an invalid
// configuration. Reloads are applied one at a time.
func (g *Gateway) Reload(cfg *Config) error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	g.see(cfg)
	old := g.state.Load()
	changes, err := plan(old.cfg, cfg)
	if err == nil && len(changes) > 0 {
		err = g.client.Update(changes...)
	}
	if err != nil {
		err = fmt.Errorf("llmgateway: reload refused, nothing changed: %w", err)
		g.log.Error("reload refused", "err", err.Error())
		return err
	}
	if cfg.source == "" {
		cfg.source = old.cfg.source
	}
	g.state.Store(newState(cfg))
	g.level.Set(parseLevel(cfg.Log.Level))
	g.log.Info("configuration reloaded", "client_changes", len(changes), "tenants", len(cfg.Tenants))
	return nil
}

// plan lists the Client changes that take old to cfg, or the fields that need a
// restart.
func plan(old, cfg *Config) ([]llmclient.Change, error) {
	var p problems
	a, b := restartPart(old), restartPart(cfg)
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		f := va.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			p.add("%s: changing it needs a restart", name)
		}
	}
	oldT := map[string]*LimitsConfig{}
	for _, t := range old.Tenants {
		oldT[t.Name] = t.Limits
	}
	newT := map[string]bool{}
	for _, t := range cfg.Tenants {
		newT[t.Name] = true
		if ol, ok := oldT[t.Name]; (ok || t.Limits != nil) && !reflect.DeepEqual(ol, t.Limits) {
			p.add("tenant %q: changing its own limits needs a restart", t.Name)
		}
	}
	for name, l := range oldT {
		if !newT[name] && l != nil {
			p.add("tenant %q: removing a tenant with its own limits needs a restart", name)
		}
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	var changes []llmclient.Change
	for i, u := range cfg.Upstreams {
		o := old.Upstreams[i]
		if !slices.Equal(o.keys, u.keys) {
			changes = append(changes, llmclient.SetKeys(u.Name, u.keys...))
		}
		if !reflect.DeepEqual(o.Limits.limits(), u.Limits.limits()) {
			changes = append(changes, llmclient.SetLimits(u.Name, u.Limits.limits()))
		}
		if o.Timeout != u.Timeout {
			changes = append(changes, llmclient.SetTimeout(u.Name, u.Timeout.D()))
		}
		if o.Weight != u.Weight {
			changes = append(changes, llmclient.SetWeight(u.Name, u.Weight))
		}
	}
	for i, gc := range cfg.Groups {
		if !slices.Equal(old.Groups[i].Upstreams, gc.Upstreams) {
			changes = append(changes, llmclient.SetGroup(gc.Name, gc.Upstreams...))
		}
	}
	return changes, nil
}

// restartPart is c without what a reload may change.
func restartPart(c *Config) Config {
	x := *c
	x.MaxRequestBytes, x.ShutdownGrace, x.Open = 0, 0, false
	x.Log.Level = ""
	x.Timeouts.Request = 0
	x.Admin.TokenEnv, x.Admin.token = "", ""
	x.Tenants = nil
	x.env, x.source, x.raw = nil, "", nil
	x.Upstreams = slices.Clone(c.Upstreams)
	for i := range x.Upstreams {
		u := &x.Upstreams[i]
		u.KeysEnv, u.keys, u.Limits, u.Timeout, u.Weight = nil, nil, nil, 0, 0
	}
	x.Groups = slices.Clone(c.Groups)
	for i := range x.Groups {
		x.Groups[i].Upstreams = nil
	}
	return x
}

// WatchFile reloads the configuration when the contents of file change, checking
// every interval (0 means 2s), until ctx ends. A change is applied once the file
// reads the same at two checks in a row, so that a file caught half-written is not
// applied; contents a reload already tried (ReloadFile, or Reload of a configuration
// LoadFile read from file) are not tried again. An invalid file is logged and
// refused; the gateway keeps its configuration.
func (g *Gateway) WatchFile(ctx context.Context, file string, interval time.Duration) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	// A change made since the running configuration was read counts too.
	g.seenMu.Lock()
	if g.seenFile != file {
		g.seenFile, g.seenData = file, nil
		if data, err := os.ReadFile(file); err == nil {
			g.seenData = data
		}
	}
	g.seenMu.Unlock()
	var (
		pending    []byte
		hasPending bool
	)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		data, err := os.ReadFile(file)
		switch {
		case err != nil:
			if !errors.Is(err, os.ErrNotExist) {
				g.log.Error("watch", "file", file, "err", err.Error())
			}
			hasPending = false
		case g.seen(file, data):
			hasPending = false
		case !hasPending || !bytes.Equal(pending, data):
			pending, hasPending = data, true
		default:
			hasPending = false
			_ = g.reloadData(file, data)
		}
	}
}
