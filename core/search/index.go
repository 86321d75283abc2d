package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/cexec/cexec/core/catalog"
	"github.com/cexec/cexec/pluginapi/selector"
)

// onChange applies one catalog change to the selector. It runs on the
// catalog's subscriber goroutine, in order.
func (s *Service) onChange(ch catalog.Change) {
	s.idx.Lock()
	defer s.idx.Unlock()
	if s.life.Err() != nil {
		return
	}
	if ch.Reset || s.dirty {
		tools := ch.Upserts
		if !ch.Reset {
			tools = s.o.Catalog.Tools()
		}
		s.fullLocked(s.life, tools, "catalog")
		return
	}
	docs := make([]selector.Document, 0, len(ch.Upserts))
	for _, t := range ch.Upserts {
		docs = append(docs, toolDoc(t))
	}
	if err := s.indexLocked(s.life, false, docs, ch.Deletes); err != nil {
		s.failedLocked(err)
		return
	}
	s.log.Debug("selector index updated", "upserts", len(docs), "deletes", len(ch.Deletes))
}

// Reindex sends every tool and skill to the selector again, in the
// background: call it after the selector plugin was restarted (a restarted
// plugin is configured afresh and has an empty index). Searches use the
// substring match until it is done.
func (s *Service) Reindex() {
	if s.o.Selector == nil {
		return
	}
	// Under mu, so that Close never waits while a re-index is being added.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.synced = false
	s.wg.Go(func() {
		s.idx.Lock()
		defer s.idx.Unlock()
		if s.life.Err() != nil {
			return
		}
		s.fullLocked(s.life, s.o.Catalog.Tools(), "reindex")
	})
}

// RefreshSkills lists the skills again and indexes what changed (skills
// come from the operator's skills directory, which the daemon does not
// watch; `cexecctl tools refresh` calls this).
func (s *Service) RefreshSkills(ctx context.Context) error {
	if s.o.Skills == nil {
		return nil
	}
	if s.o.Selector == nil {
		skills := s.listSkills(ctx)
		s.mu.Lock()
		s.skills = skills
		s.mu.Unlock()
		return nil
	}
	s.idx.Lock()
	defer s.idx.Unlock()
	if s.dirty {
		s.fullLocked(ctx, s.o.Catalog.Tools(), "skills")
		return s.syncError()
	}
	skills, err := s.o.Skills.ListSkills(ctx)
	if err != nil {
		return fmt.Errorf("list skills: %w", err)
	}
	var ups []selector.Document
	cur := make(map[string]string, len(skills))
	for _, sk := range skills {
		d := skillDoc(sk)
		cur[sk.Name] = d.ContentHash
		if s.skillHash[sk.Name] != d.ContentHash {
			ups = append(ups, d)
		}
	}
	var dels []string
	for name := range s.skillHash {
		if _, ok := cur[name]; !ok {
			dels = append(dels, SkillsServer+"/"+name)
		}
	}
	slices.Sort(dels)
	s.mu.Lock()
	s.skills = skills
	s.mu.Unlock()
	if err := s.indexLocked(ctx, false, ups, dels); err != nil {
		s.failedLocked(err)
		return err
	}
	s.skillHash = cur
	return nil
}

func (s *Service) syncError() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.syncErr
}

// fullLocked replaces the selector's index with tools and the current
// skills. Called with idx held.
func (s *Service) fullLocked(ctx context.Context, tools []catalog.Tool, why string) {
	s.mu.Lock()
	s.synced = false
	s.mu.Unlock()
	skills := s.listSkills(ctx)
	docs := make([]selector.Document, 0, len(tools)+len(skills))
	for _, t := range tools {
		docs = append(docs, toolDoc(t))
	}
	hashes := make(map[string]string, len(skills))
	for _, sk := range skills {
		d := skillDoc(sk)
		hashes[sk.Name] = d.ContentHash
		docs = append(docs, d)
	}
	s.mu.Lock()
	s.skills = skills
	s.mu.Unlock()
	if err := s.indexLocked(ctx, true, docs, nil); err != nil {
		s.failedLocked(err)
		return
	}
	s.skillHash = hashes
	s.dirty = false
	s.generation++
	s.mu.Lock()
	s.synced, s.syncErr = true, nil
	s.mu.Unlock()
	s.log.Info("selector index rebuilt", "selector", s.o.SelectorName, "tools", len(tools), "skills", len(skills), "cause", why)
}

// failedLocked records a failed Index call: the selector's index is now of
// unknown content, so searches fall back until a full re-index succeeds
// (on the next change, RefreshSkills or Reindex).
func (s *Service) failedLocked(err error) {
	s.dirty = true
	s.mu.Lock()
	s.synced, s.syncErr = false, err
	s.mu.Unlock()
	if s.life.Err() == nil {
		s.log.Warn("selector index update failed; searches use the substring match until the next re-index", "selector", s.o.SelectorName, "error", err)
	}
}

// indexLocked sends deletes, then upserts, in calls of at most BatchSize
// documents; with reset the first call drops the old index.
func (s *Service) indexLocked(ctx context.Context, reset bool, docs []selector.Document, deletes []string) error {
	if !reset && len(docs) == 0 && len(deletes) == 0 {
		return nil
	}
	for first := true; first || len(docs) > 0 || len(deletes) > 0; first = false {
		req := selector.IndexRequest{Reset: reset && first}
		n := min(len(deletes), BatchSize)
		req.Deletes, deletes = deletes[:n:n], deletes[n:]
		n = min(len(docs), BatchSize-len(req.Deletes))
		req.Upserts, docs = docs[:n:n], docs[n:]
		cctx, cancel := context.WithTimeout(ctx, s.o.IndexTimeout)
		resp, err := s.o.Selector.Index(cctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("index %d documents in selector %s: %w", len(req.Upserts)+len(req.Deletes), s.o.SelectorName, err)
		}
		for _, d := range resp.Diagnostics {
			s.log.Warn("selector index: "+d.Summary, "detail", d.Detail)
		}
		if resp.Diagnostics.HasErrors() {
			return fmt.Errorf("selector %s refused documents: %w", s.o.SelectorName, resp.Diagnostics)
		}
	}
	return nil
}

// toolDoc is what the selector indexes of a tool. Local tools have no input
// schema; their signature carries the parameter names instead.
func toolDoc(t catalog.Tool) selector.Document {
	desc := description(t)
	if t.Local != nil && t.Stub.Signature != "" {
		desc = strings.TrimSpace(desc + "\n" + t.Stub.Signature)
	}
	return selector.Document{
		ID: t.ID, Kind: KindTool, Server: t.Server, Name: t.Name,
		Description: desc, InputSchema: t.InputSchema, ContentHash: t.Hash,
	}
}

func skillDoc(sk Skill) selector.Document {
	sum := sha256.Sum256([]byte("skill\x00" + sk.Name + "\x00" + sk.Description + "\x00" + sk.Import))
	return selector.Document{
		ID: SkillsServer + "/" + sk.Name, Kind: KindSkill, Server: SkillsServer, Name: sk.Name,
		Description: sk.Description, ContentHash: hex.EncodeToString(sum[:]),
	}
}

// Generation counts the full re-indexes that succeeded.
func (s *Service) Generation() uint64 {
	s.idx.Lock()
	defer s.idx.Unlock()
	return s.generation
}

// Synced reports whether the selector holds the whole current catalogue
// (always false without a selector).
func (s *Service) Synced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}
