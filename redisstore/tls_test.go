package redisstore_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmclient/llmclient/limitstore"
	"github.com/llmclient/llmclient/redisstore"
	"github.com/redis/go-redis/v9"
)

// testPKI is a throwaway CA with a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files into dir.
type testPKI struct {
	dir    string
	pool   *x509.CertPool // trusts the CA
	client tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redisstore test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.pool.AddCert(ca)
	p.write(t, "ca.crt", "CERTIFICATE", caDER)
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (der []byte, key *ecdsa.PrivateKey) {
		key = newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	serverDER, serverKey := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	p.write(t, "server.crt", "CERTIFICATE", serverDER)
	p.writeKey(t, "server.key", serverKey)
	clientDER, clientKey := leaf(3, "redisstore test client", x509.ExtKeyUsageClientAuth)
	p.client = tls.Certificate{Certificate: [][]byte{clientDER}, PrivateKey: clientKey}
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (p *testPKI) path(name string) string { return filepath.Join(p.dir, name) }

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(p.path(name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *testPKI) writeKey(t *testing.T, name string, k *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	p.write(t, name, "EC PRIVATE KEY", der)
}

// clientTLS is what a client of the test server sets as redis.Options.TLSConfig.
func (p *testPKI) clientTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.pool, Certificates: []tls.Certificate{p.client}}
}

// TestTLS runs the store against a redis-server that accepts only TLS connections with a
// client certificate (tls-auth-clients yes): through a client with the README's TLS
// settings two stores share a scope; a client that speaks plain TCP, trusts another CA or
// has no client certificate cannot reach it, and the store says so (ErrUnavailable).
// A redis-server built without TLS skips the test, saying so.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	srv := startRedisWith(t, serverConfig{
		tls: pki.clientTLS(),
		args: []string{"--tls-cert-file", pki.path("server.crt"), "--tls-key-file", pki.path("server.key"),
			"--tls-ca-cert-file", pki.path("ca.crt"), "--tls-auth-clients", "yes"},
		skip: "this redis-server does not serve TLS (built without BUILD_TLS=yes?)",
	})
	store := func(cfg *tls.Config) *redisstore.Store {
		rdb := redis.NewClient(&redis.Options{Addr: srv.addr(), TLSConfig: cfg, ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		s, err := redisstore.New(rdb, redisstore.WithFailMode(redisstore.FailClosed), redisstore.WithTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	spec := limitstore.Spec{Requests: limitstore.Rate{PerSecond: 1.0 / 3600, Burst: 1}, MaxConcurrent: 1, BatchShare: 1}
	a, b := store(pki.clientTLS()), store(pki.clientTLS())
	exerciseShared(t, a.Open("tls", spec), b.Open("tls", spec))
	if !a.Healthy() || !b.Healthy() {
		t.Fatal("a store over TLS marked Redis down")
	}

	otherCA := newTestPKI(t)
	noCert := pki.clientTLS()
	noCert.Certificates = nil
	for name, cfg := range map[string]*tls.Config{"plain TCP": nil, "another CA": otherCA.clientTLS(), "no client certificate": noCert} {
		t.Run(name, func(t *testing.T) {
			s := store(cfg)
			_, _, err := reserveWait(s.Open("tls", spec), ctx(t), limitstore.Reservation{Requests: 1, MaxWait: 0})
			if !errors.Is(err, redisstore.ErrUnavailable) {
				t.Fatalf("Reserve: %v, want ErrUnavailable", err)
			}
			t.Logf("%s: %v", name, err)
		})
	}
}
