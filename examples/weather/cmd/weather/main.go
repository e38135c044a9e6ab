// Command weather serves the seeds' weather service (package weather) on
// sluice, or on plain net/http for comparison, until Ctrl-C:
//
//	go run ./examples/weather/cmd/weather -cpu 1ms -db 10ms
//	go run ./examples/weather/cmd/weather -target nethttp
//	curl -s 'localhost:8080/forecast?city=Lisbon'
//
// On sluice the server admits requests while at most half the workers are
// busy, queues the rest for up to 100 ms, then answers 503 (safe to retry).
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

	"github.com/sluice-go/sluice/examples/weather"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/queue"
	srt "github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/server"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	target := flag.String("target", "sluice", "server: sluice or nethttp")
	var opts weather.Options
	flag.DurationVar(&opts.CPU, "cpu", time.Millisecond, "CPU time per request")
	flag.DurationVar(&opts.DB, "db", 10*time.Millisecond, "database wait per request")
	flag.BoolVar(&opts.Blocking, "blocking", false, "the database wait holds the worker (time.Sleep)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := weather.Handler(opts)
	var err error
	switch *target {
	case "sluice":
		err = serveSluice(ctx, *addr, h)
	case "nethttp":
		err = serveNetHTTP(ctx, *addr, h)
	default:
		err = errors.New("-target must be sluice or nethttp")
	}
	if err != nil {
		log.Fatal(err)
	}
}

func serveSluice(ctx context.Context, addr string, h http.Handler) error {
	rt, err := srt.New()
	if err != nil {
		return err
	}
	if err := rt.Start(); err != nil {
		return err
	}
	srv, err := server.Listen(rt.Scheduler, addr, server.HTTPHandler(h), server.Config{
		Gate:  gate.NewBusy(rt.Scheduler, gate.BusyOptions{}),
		Queue: &queue.Options{},
	})
	if err != nil {
		return errors.Join(err, rt.Stop(context.Background()))
	}
	log.Printf("weather on sluice, %d workers, http://%s/forecast?city=Lisbon", rt.NumWorkers(), srv.Addr())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return errors.Join(srv.Shutdown(sctx), rt.Stop(sctx))
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
