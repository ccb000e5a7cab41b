package adapter

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/llmclient/llmclient"
)

// InlineImage reads an image part that is sent inline: bytes (with Part.MIMEType, else a
// sniffed type) or a base64 data: URL. It returns the media type and the base64 data with
// inline true; inline false for any other URL, which the vendor gets by reference. It
// fails on a part with neither URL nor data and on a data: URL that is not base64. Errors
// carry no package prefix.
func InlineImage(p llmclient.Part) (mediaType, data string, inline bool, err error) {
	if p.ImageURL == "" {
		if len(p.ImageData) == 0 {
			return "", "", false, errors.New("image part without URL or data")
		}
		mt := p.MIMEType
		if mt == "" {
			mt = http.DetectContentType(p.ImageData)
		}
		return mt, base64.StdEncoding.EncodeToString(p.ImageData), true, nil
	}
	if !strings.HasPrefix(p.ImageURL, "data:") {
		return "", "", false, nil
	}
	mt, data, ok := parseDataURL(p.ImageURL)
	if !ok {
		return "", "", false, errors.New("image data URL is not base64-encoded (want data:<type>;base64,<data>)")
	}
	return mt, data, true, nil
}

// parseDataURL splits "data:<media type>;base64,<data>".
func parseDataURL(u string) (mediaType, data string, ok bool) {
	meta, data, found := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !found {
		return "", "", false
	}
	mediaType, enc, _ := strings.Cut(meta, ";")
	if enc != "base64" || mediaType == "" {
		return "", "", false
	}
	return mediaType, data, true
}
