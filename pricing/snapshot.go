package pricing

import (
	"bytes"
	_ "embed"
	"sync"
)

//go:generate go run ./internal/gen -in $GENAI_PRICES -out data/prices.json

// SnapshotSource names the data the embedded snapshot was derived from.
const SnapshotSource = "@pydantic/genai-prices 0.1.8 (MIT licence), 18 providers"

//go:embed data/prices.json
var snapshot []byte

var defaultTable = sync.OnceValue(func() *Table {
	t, err := Load(bytes.NewReader(snapshot))
	if err != nil {
		// The package's tests load the same bytes; this is a corrupted build.
		panic("pricing: the embedded snapshot does not load: " + err.Error())
	}
	return t
})

// Default returns the table of the embedded snapshot (SnapshotSource), parsed on first use
// (15–20 ms; call it at start-up to keep that off a first request) and shared: every call
// returns the same *Table, safe for concurrent use. Prices change every month; Load a newer
// file of the same shape to replace it.
func Default() *Table { return defaultTable() }
