package await_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/sched"
)

// The recipe for a client that await has no wrapper for, here go-redis: put
// the blocking call in a function that sched.Await runs, give it the
// context that function receives, and return what the handler needs. The
// worker serves other requests while Redis answers. Make the client once,
// not per request. (Not run: it needs a Redis server; TestRedisRecipe runs
// the same calls against one.)
func Example_redis() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /greeting/{name}", func(w http.ResponseWriter, r *http.Request) {
		key := "greeting:" + r.PathValue("name")
		greeting, err := sched.Await(r.Context(), func(ctx context.Context) (string, error) {
			return rdb.Get(ctx, key).Result() // runs off the worker
		})
		switch {
		case errors.Is(err, redis.Nil): // errors come back unchanged
			http.NotFound(w, r)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadGateway)
		default:
			io.WriteString(w, greeting)
		}
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := sluice.ListenAndServe(ctx, ":8080", mux, sluice.Config{}); err != nil {
		log.Fatal(err)
	}
}
