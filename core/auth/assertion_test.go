package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// The assertion verifies with the public key, as RFC 7515 computes it, and
// carries the claims RFC 7523 §3 requires.
func TestClientAssertionSignatures(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, key := range []crypto.Signer{ec, rs} {
		jwt, err := clientAssertion(key, "svc", "https://as.example")
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(jwt, ".")
		if len(parts) != 3 {
			t.Fatalf("%q is not a JWS", jwt)
		}
		enc := base64.RawURLEncoding
		var hdr map[string]string
		var claims map[string]any
		hb, _ := enc.DecodeString(parts[0])
		cb, _ := enc.DecodeString(parts[1])
		sig, _ := enc.DecodeString(parts[2])
		_ = json.Unmarshal(hb, &hdr)
		_ = json.Unmarshal(cb, &claims)
		digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		switch k := key.(type) {
		case *ecdsa.PrivateKey:
			r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
			if hdr["alg"] != "ES256" || len(sig) != 64 || !ecdsa.Verify(&k.PublicKey, digest[:], r, s) {
				t.Errorf("ES256 assertion does not verify: %v", hdr)
			}
		case *rsa.PrivateKey:
			if hdr["alg"] != "RS256" || rsa.VerifyPKCS1v15(&k.PublicKey, crypto.SHA256, digest[:], sig) != nil {
				t.Errorf("RS256 assertion does not verify: %v", hdr)
			}
		}
		if claims["iss"] != "svc" || claims["sub"] != "svc" || claims["aud"] != "https://as.example" || claims["jti"] == "" || claims["exp"] == nil {
			t.Errorf("claims %v", claims)
		}
	}
}
