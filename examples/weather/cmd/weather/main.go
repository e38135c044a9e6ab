// Command weather serves the weather service (package weather) on
// sluice, or on plain net/http for comparison, until Ctrl-C:
//
//	go run ./examples/weather/cmd/weather -cpu 1ms -db 10ms
//	go run ./examples/weather/cmd/weather -target nethttp
//	curl -s 'localhost:8080/forecast?city=Lisbon'
//
// On sluice, with -busy (the handler waits for its database, so workers
// are free meanwhile) the server admits requests while at most half the
// workers are busy and queues the rest; without it, it relies on the age
// limit alone. Either way a request that has waited 100 ms since it
// arrived is answered 503, unstarted (safe to retry).
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/queue"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	target := flag.String("target", "sluice", "server: sluice or nethttp")
	var opts weather.Config
	flag.DurationVar(&opts.CPU, "cpu", time.Millisecond, "CPU time per request")
	flag.DurationVar(&opts.DB, "db", 10*time.Millisecond, "database wait per request")
	flag.BoolVar(&opts.Blocking, "blocking", false, "the database wait holds the worker (time.Sleep)")
	busy := flag.Bool("busy", false, "on sluice: the busy-worker gate (half the workers) and a timed queue")
	hold := flag.Duration("hold", 0, "on sluice: how long a client that resends at once is left unread after a refusal at the age limit (HoldRefused; 0: the refusal's Retry-After, the default; negative: never)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := weather.Handler(opts)
	var err error
	switch *target {
	case "sluice":
		err = serveSluice(ctx, *addr, h, *busy, *hold)
	case "nethttp":
		err = serveNetHTTP(ctx, *addr, h)
	default:
		err = errors.New("-target must be sluice or nethttp")
	}
	if err != nil {
		log.Fatal(err)
	}
}

func serveSluice(ctx context.Context, addr string, h http.Handler, busy bool, hold time.Duration) error {
	cfg := sluice.Config{Admission: admit.Config{MaxAge: 100 * time.Millisecond}, HoldRefused: hold}
	if busy {
		g, err := gate.NewBusy(gate.BusyConfig{})
		if err != nil {
			return err
		}
		cfg.Admission.Gates = []admit.Policy{g}
		cfg.Admission.Queue = &admit.QueueConfig{Order: queue.CoDel}
	}
	srv, err := sluice.Listen(addr, h, cfg)
	if err != nil {
		return err
	}
	if rt := srv.Runtime(); rt != nil {
		log.Printf("weather on sluice, %d workers, http://%s/forecast?city=Lisbon", rt.NumWorkers(), srv.Addr())
	} else { // off Linux: net/http behind the admission pipeline
		log.Printf("weather on net/http behind sluice's admission, http://%s/forecast?city=Lisbon", srv.Addr())
	}
	return srv.Run(ctx)
}

func serveNetHTTP(ctx context.Context, addr string, h http.Handler) error {
	hs := &http.Server{Addr: addr, Handler: h}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	log.Printf("weather on net/http, http://%s/forecast?city=Lisbon", addr)
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
