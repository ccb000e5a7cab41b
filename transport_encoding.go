package llmclient

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"

	"github.com/llmclient/llmclient/failure"
	"github.com/llmclient/llmclient/internal/headers"
	"github.com/llmclient/llmclient/internal/httpx"
)

// Bodies the base transport left encoded: it decodes only what it asked for itself, so a
// body arrives gzip or deflate encoded when the caller set Accept-Encoding. The caller gets
// such a body as it came; the transport decodes it for itself, within its limits.

// decodeContent returns r decoded per the Content-Encoding enc; decoded is false, and rc
// what is left of r as it is, for identity, an encoding it does not decode (br, zstd) or a
// deflate body too short to be one. err is a gzip header that does not parse.
func decodeContent(enc string, r io.Reader) (rc io.ReadCloser, decoded bool, err error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, false, err
		}
		return zr, true, nil
	case "deflate":
		rc, decoded = deflateReader(r)
		return rc, decoded, nil
	}
	return io.NopCloser(r), false, nil
}

// readErrorBody reads at most httpx.MaxErrorBody of an error body, decoding gzip and
// deflate when the base transport left them encoded (decoded reports that it did).
func readErrorBody(resp *http.Response) (data []byte, decoded bool, err error) {
	var r io.Reader = resp.Body
	if !resp.Uncompressed {
		// On a gzip header that does not parse, the rest is read as it is.
		if zr, ok, zerr := decodeContent(headers.Value(resp.Header, "Content-Encoding"), resp.Body); zerr == nil {
			defer zr.Close()
			r, decoded = zr, ok
		}
	}
	data, err = httpx.ReadLimited(r, httpx.MaxErrorBody)
	return data, decoded, err
}

// deflateReader decodes a "deflate" body: the zlib format (RFC 9110 8.4.1.2), or raw
// DEFLATE, which some servers send under that name, told apart by the zlib header. ok is
// false, and rc the body as it came, when it is too short to be either.
func deflateReader(body io.Reader) (rc io.ReadCloser, ok bool) {
	var h [2]byte
	n, _ := io.ReadFull(body, h[:])
	r := io.MultiReader(bytes.NewReader(h[:n]), body)
	if n < len(h) {
		return io.NopCloser(r), false
	}
	// A zlib header: method 8, a window of at most 32 KiB, the check bits, no preset
	// dictionary. zlib.NewReader reads just these two bytes, and accepts them.
	if h[0]&0x0f == 8 && h[0]>>4 <= 7 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 && h[1]&0x20 == 0 {
		if zr, err := zlib.NewReader(r); err == nil {
			return zr, true
		}
	}
	return flate.NewReader(io.MultiReader(bytes.NewReader(h[:]), body)), true
}

// decodedUsageBody is data, a one-shot body read whole, decoded for its usage when the
// base transport left it gzip or deflate encoded (the caller asked so): at most limit
// bytes of it, so that a decompression bomb stays bounded; nil when it does not decode.
func decodedUsageBody(resp *http.Response, enc string, data []byte, limit int64) []byte {
	if resp.Uncompressed || enc == "" || strings.EqualFold(strings.TrimSpace(enc), "identity") {
		return data
	}
	zr, ok, err := decodeContent(enc, bytes.NewReader(data))
	if err != nil || !ok {
		return nil // br, zstd: not decoded here
	}
	out, err := httpx.ReadLimited(zr, limit)
	if err != nil {
		return nil
	}
	return out
}

// decodeView makes view, a stream's response as its decoder sees it, read rec decoded
// when it is gzip or deflate, and returns its decoded body; another encoding is left as
// it is (nil).
func decodeView(view *http.Response, rec *recorder) (*tailReader, error) {
	zr, ok, err := decodeContent(headers.Value(view.Header, "Content-Encoding"), rec)
	if err != nil {
		return nil, &Error{Class: failure.Network, Message: "reading the gzip stream", Err: err}
	}
	if !ok {
		view.Body = zr // rec, and what a deflate body too short to decode read of it
		return nil, nil
	}
	tr := &tailReader{ReadCloser: zr}
	view.Body = tr
	view.Header = view.Header.Clone()
	view.Header.Del("Content-Encoding")
	view.Uncompressed, view.ContentLength = true, -1
	return tr, nil
}
