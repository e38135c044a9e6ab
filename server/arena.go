package server

// arena hands out the strings of request heads, and the slices that hold
// their field values, from chunks it allocates now and then instead of one
// allocation per request. It only ever appends to a chunk: what it handed
// out is never written again, so a string a handler keeps stays what it
// was, for as long as it is kept (and keeps its chunk alive). A worker has
// one and uses it alone; a nil arena allocates each time.
type arena struct {
	bytes []byte   // the current chunk's unused room
	vals  []string // the current chunk's unused room
}

const (
	arenaBytes    = 8 << 10 // a chunk of bytes
	arenaMaxBytes = 1 << 10 // a longer head is copied alone
	arenaVals     = 256     // a chunk of strings
	arenaMaxVals  = 32      // more fields are given a slice alone
)

// str returns a copy of b as a string.
func (a *arena) str(b []byte) string {
	if a == nil || len(b) > arenaMaxBytes {
		return string(b)
	}
	if len(b) > len(a.bytes) {
		a.bytes = make([]byte, arenaBytes)
	}
	n := copy(a.bytes, b)
	s := bytesToString(a.bytes[:n])
	a.bytes = a.bytes[n:]
	return s
}

// strings returns n zeroed strings, with no room to append beyond them.
func (a *arena) strings(n int) []string {
	if a == nil || n > arenaMaxVals {
		return make([]string, n)
	}
	if n > len(a.vals) {
		a.vals = make([]string, arenaVals)
	}
	v := a.vals[:n:n]
	a.vals = a.vals[n:]
	return v
}
