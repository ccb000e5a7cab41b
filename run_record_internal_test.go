package llmclient

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/llmclient/llmclient/failure"
	"github.com/stretchr/testify/require"
)

// fillNonZero sets every field of the struct v points to, recursively, to a value that is
// not its zero value.
func fillNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("dirty")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillNonZero(t, v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Interface:
		v.Set(reflect.ValueOf(errors.New("dirty")))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(7, 0)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillNonZero(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("fillNonZero: kind %s", v.Kind())
	}
}

// TestRecordWritesEveryField checks that record writes every field of a trace entry, as
// it must since it reuses a trace's spare capacity without clearing it first: an entry
// recorded over a dirty slot equals one recorded over a zero slot.
func TestRecordWritesEveryField(t *testing.T) {
	up := &upstream{Upstream: Upstream{Name: "a"}}
	for _, tc := range []struct {
		name  string
		e     *Error
		usage *Usage
	}{
		{"success", nil, &Usage{InputTokens: 3, OutputTokens: 1}},
		{"failure", &Error{Class: failure.RateLimited, Status: 429, RetryAfter: time.Second}, nil},
		{"neither", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entry := func(dirty bool) Attempt {
				buf := make([]Attempt, 1)
				if dirty {
					fillNonZero(t, reflect.ValueOf(&buf[0]).Elem())
					for i := 0; i < reflect.TypeOf(Attempt{}).NumField(); i++ {
						require.False(t, reflect.ValueOf(buf[0]).Field(i).IsZero(), "field %s left zero",
							reflect.TypeOf(Attempt{}).Field(i).Name)
					}
				}
				r := &run{c: &Client{}, trace: buf[:0]}
				a := &attempt{r: r, up: up, number: 1, begun: time.Unix(100, 0), status: 200}
				a.call.Model = "m"
				r.record(a, tc.e, tc.usage)
				require.Len(t, r.trace, 1)
				return r.trace[0]
			}
			require.Equal(t, entry(false), entry(true))
		})
	}
}
