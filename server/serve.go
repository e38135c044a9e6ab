package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	srt "github.com/sluice-go/sluice/runtime"
)

// ShutdownGrace is how long ListenAndServe lets requests in progress finish
// after its context ends, before it closes what is left.
const ShutdownGrace = 30 * time.Second

// ListenAndServe serves h on addr on a new sluice runtime (by default one
// pinned worker per usable CPU; see package runtime for opts) until ctx
// ends, then shuts down gracefully: it stops accepting, waits up to
// ShutdownGrace for requests in progress, closes the rest and stops the
// runtime. It returns nil after a clean shutdown.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, cfg Config, opts ...srt.Option) error {
	return Serve(ctx, addr, HTTPHandler(h), cfg, opts...)
}

// Serve is ListenAndServe for a native Handler.
func Serve(ctx context.Context, addr string, h Handler, cfg Config, opts ...srt.Option) error {
	rt, err := srt.New(opts...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := rt.Start(); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	srv, err := Listen(rt.Scheduler, addr, h, cfg)
	if err != nil {
		_ = rt.Stop(context.Background())
		return err
	}
	<-ctx.Done()
	grace, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err = srv.Shutdown(grace)
	if errors.Is(err, context.DeadlineExceeded) {
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelClose()
		err = errors.Join(err, srv.Close(closeCtx))
	}
	stopCtx, cancelStop := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelStop()
	return errors.Join(err, rt.Stop(stopCtx))
}
