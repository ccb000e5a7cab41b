package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/llmclient/llmclient"
)

// keyVersion is written first into every request key, so that a change of the canonical
// encoding never lets a new build read an old build's entries (in a shared Redis). It
// also versions the fingerprints of idempotency records: records of a build with another
// version cannot be compared and are misses, for one idempotency window.
// Version 2 added Message.IsError and Request.DisableParallelToolCalls.
const keyVersion = 2

// idempotencyKeyVersion is written first into every idempotency key, whose encoding does
// not depend on the request's: it changes only when that encoding does, so that records
// written by the build before stay found across a deploy (fingerprint says how they are
// compared).
const idempotencyKeyVersion = 1

// Key returns the exact-cache key of req in the partition part: the hex SHA-256 of a
// canonical encoding of everything that affects the answer.
//
// The key covers Request.Model as the caller named it (the model or model group, before
// the Client's routing maps it to an upstream's own model name: the middleware runs
// before routing), Messages (roles, every part with its text, image URL or bytes, MIME
// type, detail and cache mark; tool calls; tool-call ids; error marks; names; cache
// marks), Tools (name, description, parameters, strict, cache mark), ToolChoice,
// DisableParallelToolCalls, MaxTokens, Temperature, TopP, Stop, ResponseFormat and Extra,
// each with its presence (a nil pointer and a zero value differ). Tool parameters and schemas count without their
// insignificant whitespace; Extra counts by content, its keys sorted, so that 7 and 7.0
// or a struct and the map it encodes to are one value. The key leaves out Priority and
// Metadata, which do not reach the vendor, and PromptCacheKey, which says where the
// vendor looks up its prompt cache, not what it answers; metadataKeys names the Metadata entries to
// include anyway (for example a prompt version). The key holds only the Request: the
// context's llmclient.CallOptions (their Headers, pins and exclusions) are not in it, as
// their headers are usually per call (a trace or idempotency header); a header that
// changes the answer, such as a vendor's beta flag, needs its own namespace or partition.
// namespace separates keys of different configurations (see WithNamespace). Key is safe
// for concurrent use.
func Key(namespace, partition string, req *llmclient.Request, metadataKeys ...string) string {
	return key(0, namespace, partition, req, metadataKeys)
}

// key is Key, with prefix (when not 0) before the hex digits, in one allocation.
func key(prefix byte, namespace, partition string, req *llmclient.Request, metadataKeys []string) string {
	w := getWriter()
	writeKey(w, namespace, partition, req, metadataKeys)
	s := w.hexSum(prefix)
	putWriter(w)
	return s
}

// fingerprint identifies req in the record of its idempotency key, whose own key does not
// say what was asked. The idempotency key holds the namespace and the partition; the
// fingerprint holds what the exact key holds besides, in three hashes that a deploy
// changes apart: the request as it reaches the vendor (writeRequest), the names of the
// key metadata (WithKeyMetadata, sorted), and the key metadata the request carries. It
// starts with keyVersion, the version of writeRequest's encoding:
//
//	f<keyVersion>.<request>.<metadata names>.<metadata values>
//
// sameRequest compares two of them.
func fingerprint(req *llmclient.Request, metadataKeys []string) string {
	names := slices.Clone(metadataKeys)
	slices.Sort(names)
	names = slices.Compact(names)
	w := getWriter()
	writeRequest(w, req)
	b := make([]byte, 0, 2+2+2*sha256.Size+2+2*fingerprintTail)
	b = append(strconv.AppendInt(append(b, 'f'), keyVersion, 10), '.')
	b = w.appendHex(b, sha256.Size)
	w.reset()
	w.uint(uint64(len(names)))
	for _, k := range names {
		w.str(k)
	}
	b = w.appendHex(append(b, '.'), fingerprintTail)
	w.reset()
	for _, k := range names {
		if v, ok := req.Metadata[k]; ok {
			w.str(k)
			w.str(v)
		}
	}
	b = w.appendHex(append(b, '.'), fingerprintTail)
	putWriter(w)
	return string(b)
}

// fingerprintTail is how many bytes of their digests the metadata hashes keep.
const fingerprintTail = 16

// match is what a stored idempotency record's fingerprint says of a call's request.
type match int

const (
	sameRequest  match = iota // replay the record
	otherRequest              // refuse the call: ErrIdempotencyMismatch
	unknown                   // written by a build that encodes requests otherwise: a miss
)

// matchFingerprint compares the fingerprint of a stored record with the call's (ours,
// from fingerprint) and its exact key. A request that reaches the vendor differently is
// another request. One that carries other key metadata is another request too when both
// builds name the same key metadata; when they name other metadata (a deploy that
// changes WithKeyMetadata), it is the same request if it carries the same key metadata,
// as each build names it, else the two cannot be told apart: unknown. Records of the
// builds that stored the exact key as the fingerprint match that key, else are unknown;
// so are records of another keyVersion.
func matchFingerprint(stored, ours, exactKey string) match {
	if stored == ours || stored == exactKey {
		return sameRequest
	}
	s, o := strings.Split(stored, "."), strings.Split(ours, ".")
	if len(s) != 4 || s[0] != o[0] {
		return unknown
	}
	switch {
	case s[1] != o[1]:
		return otherRequest
	case s[3] == o[3]: // the same key metadata, named otherwise
		return sameRequest
	case s[2] == o[2]:
		return otherRequest
	}
	return unknown
}

// writeKey writes what Key hashes.
func writeKey(w *keyWriter, namespace, partition string, req *llmclient.Request, metadataKeys []string) {
	w.uint(keyVersion)
	w.str(namespace)
	w.str(partition)
	writeRequest(w, req)
	w.uint(uint64(len(metadataKeys)))
	for _, k := range metadataKeys {
		v, ok := req.Metadata[k]
		w.str(k)
		w.bool(ok)
		w.str(v)
	}
}

// writeRequest writes the fields of req that reach the vendor. Every field of
// llmclient.Request must be written here or named in keyIgnored (key_test.go checks).
func writeRequest(w *keyWriter, req *llmclient.Request) {
	w.str(req.Model)
	writeMessages(w, req.Messages)
	w.uint(uint64(len(req.Tools)))
	for i := range req.Tools {
		t := &req.Tools[i]
		w.str(t.Name)
		w.str(t.Description)
		w.json(t.Parameters)
		w.bool(t.Strict)
		w.cacheMark(t.Cache)
	}
	w.bool(req.ToolChoice != nil)
	if tc := req.ToolChoice; tc != nil {
		w.str(string(tc.Mode))
		w.str(tc.Name)
	}
	w.bool(req.DisableParallelToolCalls)
	w.int(int64(req.MaxTokens))
	w.float(req.Temperature)
	w.float(req.TopP)
	w.uint(uint64(len(req.Stop)))
	for _, s := range req.Stop {
		w.str(s)
	}
	w.bool(req.ResponseFormat != nil)
	if f := req.ResponseFormat; f != nil {
		w.str(string(f.Type))
		w.str(f.Name)
		w.json(f.Schema)
		w.bool(f.Strict)
	}
	w.extra(req.Extra)
}

func writeMessages(w *keyWriter, msgs []llmclient.Message) {
	w.uint(uint64(len(msgs)))
	for i := range msgs {
		m := &msgs[i]
		w.str(string(m.Role))
		w.uint(uint64(len(m.Content)))
		for j := range m.Content {
			p := &m.Content[j]
			w.uint(uint64(p.Type))
			w.str(p.Text)
			w.str(p.ImageURL)
			w.bytes(p.ImageData)
			w.str(p.MIMEType)
			w.str(p.Detail)
			w.cacheMark(p.Cache)
		}
		w.uint(uint64(len(m.ToolCalls)))
		for _, tc := range m.ToolCalls {
			w.str(tc.ID)
			w.str(tc.Name)
			w.str(tc.Arguments)
		}
		w.str(m.ToolCallID)
		w.bool(m.IsError)
		w.str(m.Name)
		w.cacheMark(m.Cache)
	}
}

// keyWriter feeds a canonical, prefix-free encoding into SHA-256: every value is written
// with its length, so that no two different requests encode to the same bytes.
type keyWriter struct {
	h     hashWriter
	buf   []byte // pending bytes, flushed to h when full
	sum   [sha256.Size]byte
	depth int // of the arrays and objects value is inside
}

// maxValueDepth is how deep value walks arrays and objects before it writes what is
// deeper as its JSON encoding: a value that holds itself (a map in its own Extra) ends
// there, with encoding/json's error, instead of recursing until the stack overflows.
// encoding/json starts looking for cycles at the same depth.
const maxValueDepth = 1000

type hashWriter interface {
	Write(p []byte) (int, error)
	Sum(b []byte) []byte
	Reset()
}

const keyBufSize = 4096

var writers = sync.Pool{New: func() any {
	return &keyWriter{h: sha256.New(), buf: make([]byte, 0, keyBufSize)}
}}

func getWriter() *keyWriter { return writers.Get().(*keyWriter) }

func putWriter(w *keyWriter) {
	w.reset()
	writers.Put(w)
}

func (w *keyWriter) flush() {
	if len(w.buf) > 0 {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

// appendHex appends the first n bytes of the digest in hex to b.
func (w *keyWriter) appendHex(b []byte, n int) []byte {
	w.flush()
	w.h.Sum(w.sum[:0])
	return hex.AppendEncode(b, w.sum[:n])
}

// reset starts a new digest.
func (w *keyWriter) reset() {
	w.h.Reset()
	w.buf = w.buf[:0]
	w.depth = 0
}

// hexSum returns the digest in hex, after prefix when it is not 0.
func (w *keyWriter) hexSum(prefix byte) string {
	w.flush()
	w.h.Sum(w.sum[:0])
	var out [1 + 2*sha256.Size]byte
	b := out[:0]
	if prefix != 0 {
		b = append(b, prefix)
	}
	return string(hex.AppendEncode(b, w.sum[:]))
}

func (w *keyWriter) room(n int) {
	if len(w.buf)+n > cap(w.buf) {
		w.flush()
	}
}

func (w *keyWriter) uint(v uint64) {
	w.room(binary.MaxVarintLen64)
	w.buf = binary.AppendUvarint(w.buf, v)
}

func (w *keyWriter) int(v int64) {
	w.room(binary.MaxVarintLen64)
	w.buf = binary.AppendVarint(w.buf, v)
}

func (w *keyWriter) bool(v bool) {
	w.room(1)
	if v {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

// str writes s with its length, copying it through the buffer without allocating.
func (w *keyWriter) str(s string) {
	w.uint(uint64(len(s)))
	for len(s) > 0 {
		if len(w.buf) == cap(w.buf) {
			w.flush()
		}
		n := copy(w.buf[len(w.buf):cap(w.buf)], s)
		w.buf = w.buf[:len(w.buf)+n]
		s = s[n:]
	}
}

func (w *keyWriter) bytes(b []byte) {
	w.uint(uint64(len(b)))
	w.flush()
	w.h.Write(b)
}

func (w *keyWriter) float(f *float64) {
	w.bool(f != nil)
	if f != nil {
		w.uint(math.Float64bits(*f))
	}
}

func (w *keyWriter) cacheMark(c *llmclient.CacheControl) {
	w.bool(c != nil)
	if c != nil {
		w.int(int64(c.TTL))
	}
}

// json writes a JSON document without its insignificant whitespace, so that spacing and
// line breaks do not change the key (key order does: an equal schema written in another
// order is a miss, never a wrong hit). It does not allocate.
func (w *keyWriter) json(raw json.RawMessage) {
	w.bool(raw != nil)
	var text jsonText
	for _, c := range raw {
		if !text.inString(c) && isJSONSpace(c) {
			continue
		}
		w.room(1)
		w.buf = append(w.buf, c)
	}
	w.tag(tagOther) // ends the document: no JSON text contains this byte outside a string
}

// extra writes Request.Extra by content, its keys sorted.
func (w *keyWriter) extra(m map[string]any) {
	w.bool(m != nil)
	if m == nil {
		return
	}
	w.object(m)
}

func (w *keyWriter) object(m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.uint(uint64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.value(m[k])
	}
}

// Tags of the values in Extra and in parsed JSON documents.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagNumber
	tagString
	tagArray
	tagObject
	tagOther
)

// value writes one JSON-like value. Values of other Go types (structs, typed slices, the
// values Extra may hold) are written as their JSON encoding, parsed back, so that they
// count by the content the adapters send.
func (w *keyWriter) value(v any) {
	switch x := v.(type) {
	case nil:
		w.tag(tagNull)
	case bool:
		if x {
			w.tag(tagTrue)
		} else {
			w.tag(tagFalse)
		}
	case json.Number:
		w.tag(tagNumber)
		w.str(canonicalNumber(string(x)))
	case float64:
		w.number(x)
	case float32:
		w.number(float64(x))
	case int:
		w.integer(int64(x))
	case int64:
		w.integer(x)
	case int32:
		w.integer(int64(x))
	case string:
		w.tag(tagString)
		w.str(x)
	case []any:
		if w.depth >= maxValueDepth {
			w.encoded(x)
			return
		}
		w.depth++
		w.tag(tagArray)
		w.uint(uint64(len(x)))
		for _, e := range x {
			w.value(e)
		}
		w.depth--
	case map[string]any:
		if w.depth >= maxValueDepth {
			w.encoded(x)
			return
		}
		w.depth++
		w.tag(tagObject)
		w.object(x)
		w.depth--
	case json.RawMessage:
		w.jsonValue(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			w.unencodable(err)
			return
		}
		w.jsonValue(b)
	}
}

// encoded writes a value deeper than maxValueDepth as its JSON encoding.
func (w *keyWriter) encoded(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		w.unencodable(err)
		return
	}
	w.tag(tagOther)
	w.bytes(b)
}

// unencodable writes a value that has no JSON encoding: the adapter cannot send it
// either. It writes the error, so that the key still differs from a request without it.
func (w *keyWriter) unencodable(err error) {
	w.tag(tagOther)
	w.str(err.Error())
}

// jsonValue writes an encoded JSON value as value writes the decoded one; bytes that do
// not parse are written as they are.
func (w *keyWriter) jsonValue(raw []byte) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		w.tag(tagOther)
		w.bytes(raw)
		return
	}
	w.value(v)
}

// number writes a Go float as canonicalNumber writes the same number read from JSON.
func (w *keyWriter) number(f float64) {
	w.tag(tagNumber)
	var b [32]byte
	w.strBytes(appendCanonicalFloat(b[:0], f))
}

// integer writes a Go integer as canonicalNumber writes an integer literal.
func (w *keyWriter) integer(i int64) {
	w.tag(tagNumber)
	var b [24]byte
	w.strBytes(strconv.AppendInt(b[:0], i, 10))
}

func (w *keyWriter) strBytes(b []byte) {
	w.uint(uint64(len(b)))
	w.room(len(b))
	w.buf = append(w.buf, b...)
}

func (w *keyWriter) tag(t byte) {
	w.room(1)
	w.buf = append(w.buf, t)
}

// canonicalNumber makes 1.0, 1.00 and 1e0 one number, by its float64 value. An integer
// literal stays as written: a vendor may read it as an int64 (a seed), which a float64
// would round, so two different integers never share a key.
func canonicalNumber(s string) string {
	if isIntLiteral(s) {
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return s
	}
	return string(appendCanonicalFloat(nil, f))
}

// appendCanonicalFloat appends f as an integer literal when it is a whole number that a
// float64 holds exactly, else in the shortest form that reads back as f.
func appendCanonicalFloat(b []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return strconv.AppendInt(b, int64(f), 10)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

func isIntLiteral(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
