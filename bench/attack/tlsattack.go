package attack

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// clientHello returns the first record a crypto/tls client sends: a whole
// ClientHello, captured over a pipe.
func clientHello() ([]byte, error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _ = tls.Client(a, &tls.Config{ServerName: "attack.example"}).Handshake() }()
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		return nil, err
	}
	if hdr[0] != 0x16 {
		return nil, errors.New("attack: the client's first record is not a handshake")
	}
	rec := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, rec); err != nil {
		return nil, err
	}
	return append(hdr, rec...), nil
}

// stalledHellos: connections that send the first 11 bytes of a hello
// (a handshake record announcing 512 bytes) and nothing more; a few of
// them once took every place for handshakes.
func stalledHellos() Attack {
	start := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}
	return Attack{
		Name:  "stalled-hellos",
		About: "1,000 connections each sending 11 bytes of a TLS hello and nothing more, another opened as one closes",
		TLS:   true,
		Run: func(ctx context.Context, env Env) error {
			holdOpen(ctx, env, env.conns(1000), sendThenWait(start))
			return nil
		},
	}
}

// stalledHandshakes: connections that send a whole hello and then nothing,
// leaving their handshakes waiting for the client's next flight.
func stalledHandshakes() Attack {
	return Attack{
		Name:  "stalled-handshakes",
		About: "1,000 connections each sending a whole TLS hello and then nothing, another opened as one closes (more than sluice's 512 places on two workers, whatever Options.Conns)",
		TLS:   true,
		Run: func(ctx context.Context, env Env) error {
			hello, err := clientHello()
			if err != nil {
				return err
			}
			holdOpen(ctx, env, 1000, sendThenWait(hello))
			return nil
		},
	}
}

// helloFlood: whole hellos from connections that close at once, at a
// fixed rate: each costs the target a handshake's computing unless it is
// refused first, and a server that sheds new connections by their age
// must not shed the real clients' with them while it keeps up.
func helloFlood() Attack {
	const rate = 1000
	return Attack{
		Name:  "hello-flood",
		About: "1,000 connections a second, each sending a whole TLS hello and closing",
		TLS:   true,
		Run: func(ctx context.Context, env Env) error {
			hello, err := clientHello()
			if err != nil {
				return err
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
				}
				wg.Go(func() {
					nc, err := dial(ctx, env, false)
					if err != nil {
						return
					}
					_, _ = nc.Write(hello)
					nc.Close()
				})
			}
		},
	}
}
