package server

import "testing"

// BenchmarkParseHead parses a browser-like head of 10 fields, with and
// without picking out one field for the admission's keys (the tenant
// tracker's X-Tenant): what picking adds to the parse, against the map
// lookup it saves the key; and the hello benchmark's head of 2 fields
// ("short"), with the server's room for value slices, as the server
// parses it.
func BenchmarkParseHead(b *testing.B) {
	browser := []byte("GET /api/orders?page=2 HTTP/1.1\r\nHost: shop.example.com\r\n" +
		"User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: application/json\r\n" +
		"Accept-Language: en-GB,en;q=0.9\r\nAccept-Encoding: gzip, deflate, br\r\n" +
		"X-Tenant: acme\r\nConnection: keep-alive\r\nCookie: session=abcdef0123456789\r\n" +
		"Referer: https://shop.example.com/\r\n\r\n")
	short := []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: sluice-bench\r\n\r\n")
	for _, c := range []struct {
		name string
		buf  []byte
		pick []string
	}{{"none", browser, nil}, {"picking", browser, []string{"X-Tenant"}}, {"short", short, []string{"Sluice-Timeout"}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var room [7]string
			for b.Loop() {
				h := head{pick: c.pick}
				if err := parseHead(c.buf, &h, room[:]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
