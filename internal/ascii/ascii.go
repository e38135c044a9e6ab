// Package ascii holds the byte-level text helpers HTTP/1.1 parsing needs,
// shared by the server and the benchmark's client.
package ascii

// EqualFold reports whether a and b are equal under ASCII case folding
// only: RFC 9110 field names and tokens are case-insensitive in ASCII,
// and Unicode folding (strings.EqualFold maps "ſ" to "s" and the Kelvin
// sign to "k") would let a look-alike token through.
func EqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
