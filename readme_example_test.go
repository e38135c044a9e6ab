package sluice_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/await"
	"github.com/sluice-go/sluice/client"
	"github.com/sluice-go/sluice/dashboard"
	"github.com/sluice-go/sluice/gate"
	"github.com/sluice-go/sluice/lanes"
	"github.com/sluice-go/sluice/metrics"
	"github.com/sluice-go/sluice/ratelimit"
	"github.com/sluice-go/sluice/runtime"
	"github.com/sluice-go/sluice/sched"
	"github.com/sluice-go/sluice/server"
	"github.com/sluice-go/sluice/tenant"
)

// The code of the README's sections, each as written there, in the
// context the README gives it (mux and ctx from its first block): the
// README's Go blocks must each appear in an example test
// (TestReadmeGoBlocksCompile), so that what a newcomer copies compiles.
// These examples have no output: they are compiled, not run.

// readmeContext is the README's first block's mux and ctx.
func readmeContext() (*http.ServeMux, context.Context, context.CancelFunc) {
	mux := http.NewServeMux()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return mux, ctx, stop
}

// Example_await: a handler that calls another service through await's
// client releases its worker while it waits.
func Example_await() {
	mux, ctx, stop := readmeContext()
	defer stop()

	backend := "http://127.0.0.1:9000" // the service the handler calls
	client := await.NewClient(nil)     // an *http.Client whose waits release the worker
	mux.HandleFunc("GET /users/{id}", func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), "GET", backend+"/u/"+r.PathValue("id"), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := client.Do(req) // the worker serves other requests meanwhile
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(w, resp.Body)
	})

	log.Fatal(sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{}))
}

// Example_awaitDatabase: a database opened through await, and any other
// blocking client through sched.Await.
func Example_awaitDatabase() {
	mux, ctx, stop := readmeContext()
	defer stop()

	// import _ "modernc.org/sqlite" registers the driver "sqlite"
	db, err := await.Open("sqlite", "file:app.db") // an *await.DB: SetMaxOpenConns, Stats, Close as on *sql.DB
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // go-redis
	mux.HandleFunc("GET /greeting/{name}", func(w http.ResponseWriter, r *http.Request) {
		var visits int
		err := db.QueryRowContext(r.Context(), "select count(*) from visits").Scan(&visits) // off the worker
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		greeting, err := sched.Await(r.Context(), func(ctx context.Context) (string, error) {
			return rdb.Get(ctx, "greeting:"+r.PathValue("name")).Result() // off the worker too
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%s, visit %d\n", greeting, visits)
	})

	log.Fatal(sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{}))
}

// Policy is the README's summary of admit.Policy: every admit.Policy has
// these methods (the assignment below checks it).
type Policy interface {
	Admit(a *admit.Attempt) *admit.Refusal  // nil admits; a Refusal says why, with its status
	Done(a *admit.Attempt, o admit.Outcome) // the end of a request it admitted: latency, status, error
}

var _ Policy = admit.Policy(nil)

// Example_rateLimit: a quota per API key, before the gates.
func Example_rateLimit() {
	mux, ctx, stop := readmeContext()
	defer stop()

	lim, err := ratelimit.New(ratelimit.Config{Window: time.Minute, Quota: 600})
	if err != nil {
		log.Fatal(err)
	}
	quota, err := ratelimit.NewPolicy(lim, ratelimit.PolicyConfig{Key: admit.HeaderKey("X-Api-Key")})
	if err != nil {
		log.Fatal(err)
	}
	busy, err := gate.NewBusy(gate.BusyConfig{})
	if err != nil {
		log.Fatal(err)
	}
	cfg := admit.Config{Policies: []admit.Policy{quota}, Gates: []admit.Policy{busy}, Queue: &admit.QueueConfig{}}

	log.Fatal(sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{Admission: cfg}))
}

// Example_tls: HTTPS, with HTTP/2 by ALPN.
func Example_tls() {
	mux, ctx, stop := readmeContext()
	defer stop()

	cert, err := tls.LoadX509KeyPair("cert.pem", "key.pem")
	if err != nil {
		log.Fatal(err)
	}
	cfg := sluice.Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}
	log.Fatal(sluice.ListenAndServe(ctx, ":8443", mux, cfg))
}

// Example_tenants: fairness between tenants, over Redis.
func Example_tenants() {
	mux, ctx, stop := readmeContext()
	defer stop()

	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	tr, err := tenant.New(tenant.Config{Key: admit.HeaderKey("X-Api-Key")})
	if err != nil {
		log.Fatal(err)
	}
	ctrl, err := tenant.NewController(tenant.ControllerConfig{Weights: map[string]float64{"gold": 3}})
	if err != nil {
		log.Fatal(err)
	}
	store, err := tenant.NewRedisStore(rdb, tenant.RedisConfig{Fleet: "api"}) // or tenant.NewMemoryStore(nil)
	if err != nil {
		log.Fatal(err)
	}
	agent, err := tenant.NewAgent(tenant.AgentConfig{Store: store, Tracker: tr, Controller: ctrl})
	if err != nil {
		log.Fatal(err)
	}
	go agent.Run(ctx)
	cfg := sluice.Config{Admission: admit.Config{Policies: []admit.Policy{tr}}} // with gates and a queue, or the age limit alone

	log.Fatal(sluice.ListenAndServe(ctx, ":8080", mux, cfg))
}

// Example_client: a client that retries rejections on another backend.
func Example_client() {
	tr, err := client.New(client.Config{
		Balancer: client.BalancerConfig{Backends: []string{"http://10.0.0.1:8080", "http://10.0.0.2:8080"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	hc := &http.Client{Transport: tr}          // inside sluice handlers too: its waits release the worker
	resp, err := hc.Get("http://api/users/42") // the host is replaced by a backend's
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
}

// Example_metrics: Prometheus metrics and the dashboard, on an admin
// address of their own.
func Example_metrics() {
	mux, ctx, stop := readmeContext()
	defer stop()

	srv, err := sluice.Listen(":8080", mux, sluice.Config{})
	if err != nil {
		log.Fatal(err)
	}
	col, err := metrics.New(metrics.Config{}, metrics.Server("api", srv)) // a prometheus.Collector
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(col) // col.Add(metrics.Tenants("api", tr)) adds a tenant tracker's
	dash, err := dashboard.New(dashboard.Config{Server: srv})
	if err != nil {
		log.Fatal(err)
	}
	admin := http.NewServeMux() // on an address of its own, not the public one
	admin.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	admin.Handle("/debug/sluice/", dash)
	go http.ListenAndServe("127.0.0.1:9090", admin)
	log.Fatal(srv.Run(ctx))
}

// Example_lanes: a route in a lane of its own, with a gate for it alone.
func Example_lanes() {
	mux, ctx, stop := readmeContext()
	defer stop()

	busy, err := gate.NewBusy(gate.BusyConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// a batch flood cannot take more than 4 requests at a time
	exports, err := gate.NewConcurrency(gate.ConcurrencyConfig{Limit: 4})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := sluice.Listen(":8080", mux, sluice.Config{
		Runtime: runtime.Config{Lanes: []lanes.Spec{
			{Name: "background", Priority: 2, Shares: 11},
		}},
		Lanes: server.Lanes{Routes: map[string]string{
			"GET /export/": "background", // http.ServeMux patterns
		}},
		Admission: admit.Config{Gates: []admit.Policy{
			busy,
			gate.ForLanes(exports, "background"),
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Run(ctx))
}

// Example_runtime: the executor without the HTTP server: tasks and
// coroutines in lanes, and their waits through sched.Await.
func Example_runtime() {
	ctx := context.Background()
	db, err := await.Open("sqlite", "file:app.db")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	rt, err := runtime.New(runtime.Config{}) // github.com/sluice-go/sluice/runtime
	if err != nil {
		log.Fatal(err)
	}
	bg, err := rt.RegisterLane(lanes.Spec{Name: "background", Priority: 2, Shares: 10})
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)

	rt.Go(ctx, lanes.Upstream, func(ctx context.Context) {
		var n int
		err := db.QueryRowContext(ctx, "select count(*) from visits").Scan(&n) // runs off the worker
		// resumes here, on the same worker, in the Continuation lane
		log.Println(n, err)
	})
	rt.Submit(bg, func() { log.Println("a plain task, from any goroutine") })
	rt.Lanes().SetShares(bg, 50) // tune while running
	log.Println("busy workers:", rt.Busy())
}
