// Package keys bounds the names that requests choose and the server keeps:
// rate-limit keys, tenant names. A name of a client's choosing is kept as it
// is when it is short; a longer one becomes its first bytes and a hash of
// the whole, the same in every process, so that a fleet sharing a store
// counts it as one name.
package keys

import (
	"strings"
	"unicode/utf8"
)

// hashLen is the length of Shorten's suffix: "#" and 16 hexadecimal
// digits.
const hashLen = 17

// Shorten returns key when it is at most max bytes long; otherwise its
// first bytes, cut at a UTF-8 character's start, followed by "#" and a
// 64-bit FNV-1a hash of the whole key in hexadecimal, at most max bytes in
// all. max must be more than 17.
func Shorten(key string, max int) string {
	if len(key) <= max {
		return key
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	cut := max - hashLen
	for back := 0; back < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(key[cut]); back++ {
		cut--
	}
	b := make([]byte, 0, max)
	b = append(b, key[:cut]...)
	b = append(b, '#')
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[h>>uint(shift)&15])
	}
	return string(b)
}

// Label returns name as a label that any consumer accepts (Prometheus, a
// JSON document, a dashboard): valid UTF-8, each invalid byte sequence
// replaced by U+FFFD, and at most max bytes (Shorten). It returns name
// itself, without allocating, when that is already so.
func Label(name string, max int) string { return Shorten(Valid(name), max) }

// Valid returns s with each invalid UTF-8 byte sequence replaced by
// U+FFFD: s itself, without allocating, when it is valid.
func Valid(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
