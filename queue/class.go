package queue

import (
	"net/http"
	"strings"
)

// Class is a priority class. Lower values are more important: every waiting
// entry of a class starts before any entry of a higher class, whatever their
// arrival times, and a full queue evicts from the highest class present to
// make room for a lower one. Values 0 to [MaxClasses]-1 are distinct
// classes; larger values count as MaxClasses-1. Three are named.
type Class uint8

const (
	// Critical is for requests whose failure users see at once (a page's
	// main content, a checkout).
	Critical Class = iota
	// Default is for everything not classified.
	Default
	// Sheddable is for requests that can fail without much harm (prefetches,
	// analytics, background refreshes): the first to wait and to be evicted.
	Sheddable
)

// String returns "critical", "default" or "sheddable", or "class(N)" for an
// unnamed class.
func (c Class) String() string {
	switch c {
	case Critical:
		return "critical"
	case Default:
		return "default"
	case Sheddable:
		return "sheddable"
	}
	return "class(" + itoa(uint64(c)) + ")"
}

// ParseClass returns the class named s: "critical", "default" or
// "sheddable", in any case, with surrounding spaces ignored. ok is false,
// and c is [Default], for any other string.
func ParseClass(s string) (c Class, ok bool) {
	s = strings.TrimSpace(s)
	switch {
	case strings.EqualFold(s, "critical"):
		return Critical, true
	case strings.EqualFold(s, "default"):
		return Default, true
	case strings.EqualFold(s, "sheddable"):
		return Sheddable, true
	}
	return Default, false
}

// ClassFromHeader returns the class named by the first value of header name
// in h (see [ParseClass]): "critical", "default" or "sheddable", case
// insensitive. A missing header or any other value gives [Default].
//
// A client can claim any class it likes with this header. Use it where the
// header is set by something trusted (a proxy of your own that strips it
// from outside requests); elsewhere derive the class from what the server
// knows (the route, the authenticated caller).
func ClassFromHeader(h http.Header, name string) Class {
	c, _ := ParseClass(h.Get(name))
	return c
}
