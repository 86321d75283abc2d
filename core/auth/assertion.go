package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
)

// assertionType is the client_assertion_type of a JWT (RFC 7523 §2.2).
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// clientAssertion signs a JWT that authenticates clientID at an
// authorization server whose issuer is audience (private_key_jwt, RFC 7523
// §3): ES256 with an EC P-256 key, RS256 with an RSA key.
func clientAssertion(key crypto.Signer, clientID, audience string) (string, error) {
	alg := "RS256"
	if _, ok := key.(*ecdsa.PrivateKey); ok {
		alg = "ES256"
	}
	jti, err := transport.GenerateRandomString(32)
	if err != nil {
		return "", err
	}
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": alg, "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience, "jti": jti,
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
	})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signing))
	var sig []byte
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, digest[:])
		if err != nil {
			return "", err
		}
		// JWS wants r and s as two fixed 32-byte halves, not ASN.1.
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	case *rsa.PrivateKey:
		if sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:]); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("unsupported assertion key %T", key)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}
