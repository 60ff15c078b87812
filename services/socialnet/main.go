// socialnet: ccbench's application tier for the microservices workload, shaped like DeathStarBench's
// social network: compose a post, read a home timeline, read a user timeline, follow a user.
//
//	socialnet serve -listen 127.0.0.1:8080 -pg postgres://... -redis 127.0.0.1:6379 -memcached 127.0.0.1:11211
//	socialnet seed  -pg ... -redis ... -users 1000 -posts 10 -seed 1
//
// Posts, users and the social graph live in PostgreSQL; home and user timelines (lists of post ids)
// in Redis; post bodies and follower lists are cached in memcached. Every response carries a
// Server-Timing header with the time spent waiting on each backing tier, so the front end's access
// log can attribute each request's latency to the tiers.
//
// Every endpoint accepts GET with query parameters (and POST with a form), because open-loop load
// generators vary the URL per request but not the method.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// timelineLength is how many post ids a Redis timeline keeps (DeathStarBench keeps whole timelines;
// a bound keeps the dataset's memory fixed while the mix keeps composing).
const timelineLength = 200

const schema = `
CREATE TABLE IF NOT EXISTS users (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE IF NOT EXISTS follows (follower integer NOT NULL, followee integer NOT NULL, PRIMARY KEY (follower, followee));
CREATE INDEX IF NOT EXISTS follows_followee ON follows (followee);
CREATE TABLE IF NOT EXISTS posts (id bigserial PRIMARY KEY, user_id integer NOT NULL, text text NOT NULL,
  created timestamptz NOT NULL DEFAULT now());
CREATE INDEX IF NOT EXISTS posts_user ON posts (user_id, id DESC);
`

type app struct {
	pg      *pgxpool.Pool
	rdb     *redis.Client
	mc      *memcache.Client
	timeout time.Duration
	errors  atomic.Int64
}

// timing accumulates the time one request waited on each backing tier.
type timing struct {
	pg, redis, memcached time.Duration
}

func (t *timing) header(total time.Duration) string {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 3, 64) }
	return fmt.Sprintf("pg;dur=%s, redis;dur=%s, memcached;dur=%s, app;dur=%s", ms(t.pg), ms(t.redis), ms(t.memcached), ms(total))
}

type post struct {
	ID     int64  `json:"id"`
	UserID int    `json:"user_id"`
	Text   string `json:"text"`
}

func param(r *http.Request, name string) string {
	if v := r.URL.Query().Get(name); v != "" {
		return v
	}
	return r.FormValue(name)
}

func intParam(r *http.Request, name string, fallback int) (int, error) {
	v := param(r, name)
	if v == "" {
		if fallback >= 0 {
			return fallback, nil
		}
		return 0, fmt.Errorf("missing parameter %s", name)
	}
	return strconv.Atoi(v)
}

// postsByID returns the posts for ids (in that order), from memcached, falling back to PostgreSQL
// for the misses (and filling the cache).
func (a *app) postsByID(ctx context.Context, t *timing, ids []int64) ([]post, error) {
	if len(ids) == 0 {
		return []post{}, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = "post:" + strconv.FormatInt(id, 10)
	}
	start := time.Now()
	cached, err := a.mc.GetMulti(keys)
	t.memcached += time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	found := make(map[int64]post, len(ids))
	var missing []int64
	for i, id := range ids {
		if item, ok := cached[keys[i]]; ok {
			var p post
			if json.Unmarshal(item.Value, &p) == nil {
				found[id] = p
				continue
			}
		}
		missing = append(missing, id)
	}
	if len(missing) > 0 {
		start = time.Now()
		rows, err := a.pg.Query(ctx, "SELECT id, user_id, text FROM posts WHERE id = ANY($1)", missing)
		if err != nil {
			t.pg += time.Since(start)
			return nil, fmt.Errorf("postgres: %w", err)
		}
		var fetched []post
		for rows.Next() {
			var p post
			if err := rows.Scan(&p.ID, &p.UserID, &p.Text); err != nil {
				rows.Close()
				t.pg += time.Since(start)
				return nil, fmt.Errorf("postgres: %w", err)
			}
			fetched = append(fetched, p)
		}
		rows.Close()
		t.pg += time.Since(start)
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		start = time.Now()
		for _, p := range fetched {
			found[p.ID] = p
			body, _ := json.Marshal(p)
			if err := a.mc.Set(&memcache.Item{Key: "post:" + strconv.FormatInt(p.ID, 10), Value: body}); err != nil {
				t.memcached += time.Since(start)
				return nil, fmt.Errorf("memcached: %w", err)
			}
		}
		t.memcached += time.Since(start)
	}
	result := make([]post, 0, len(ids))
	for _, id := range ids {
		if p, ok := found[id]; ok {
			result = append(result, p)
		}
	}
	return result, nil
}

func (a *app) timelineIDs(ctx context.Context, t *timing, key string, start, stop int) ([]int64, error) {
	begin := time.Now()
	values, err := a.rdb.LRange(ctx, key, int64(start), int64(stop-1)).Result()
	t.redis += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	ids := make([]int64, 0, len(values))
	for _, v := range values {
		if id, err := strconv.ParseInt(v, 10, 64); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

func (a *app) readHomeTimeline(ctx context.Context, t *timing, r *http.Request) (any, error) {
	user, err := intParam(r, "user_id", -1)
	if err != nil {
		return nil, badRequest{err}
	}
	start, _ := intParam(r, "start", 0)
	stop, _ := intParam(r, "stop", 10)
	ids, err := a.timelineIDs(ctx, t, "ht:"+strconv.Itoa(user), start, stop)
	if err != nil {
		return nil, err
	}
	return a.postsByID(ctx, t, ids)
}

func (a *app) readUserTimeline(ctx context.Context, t *timing, r *http.Request) (any, error) {
	user, err := intParam(r, "user_id", -1)
	if err != nil {
		return nil, badRequest{err}
	}
	start, _ := intParam(r, "start", 0)
	stop, _ := intParam(r, "stop", 10)
	key := "ut:" + strconv.Itoa(user)
	ids, err := a.timelineIDs(ctx, t, key, start, stop)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 && start == 0 {
		// a cold user timeline is rebuilt from the database, as DeathStarBench's user-timeline service does
		begin := time.Now()
		rows, err := a.pg.Query(ctx, "SELECT id FROM posts WHERE user_id = $1 ORDER BY id DESC LIMIT $2", user, timelineLength)
		if err != nil {
			t.pg += time.Since(begin)
			return nil, fmt.Errorf("postgres: %w", err)
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		t.pg += time.Since(begin)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if len(ids) > 0 {
			values := make([]any, len(ids))
			for i, id := range ids {
				values[i] = id
			}
			begin = time.Now()
			err = a.rdb.RPush(ctx, key, values...).Err()
			t.redis += time.Since(begin)
			if err != nil {
				return nil, fmt.Errorf("redis: %w", err)
			}
		}
		if len(ids) > stop {
			ids = ids[:stop]
		}
	}
	return a.postsByID(ctx, t, ids)
}

func (a *app) followers(ctx context.Context, t *timing, user int) ([]int, error) {
	key := "followers:" + strconv.Itoa(user)
	begin := time.Now()
	item, err := a.mc.Get(key)
	t.memcached += time.Since(begin)
	if err == nil {
		var ids []int
		if json.Unmarshal(item.Value, &ids) == nil {
			return ids, nil
		}
	} else if err != memcache.ErrCacheMiss {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	begin = time.Now()
	rows, err := a.pg.Query(ctx, "SELECT follower FROM follows WHERE followee = $1", user)
	if err != nil {
		t.pg += time.Since(begin)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	t.pg += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	result := make([]int, len(ids))
	for i, id := range ids {
		result[i] = int(id)
	}
	body, _ := json.Marshal(result)
	begin = time.Now()
	err = a.mc.Set(&memcache.Item{Key: key, Value: body})
	t.memcached += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	return result, nil
}

func (a *app) composePost(ctx context.Context, t *timing, r *http.Request) (any, error) {
	user, err := intParam(r, "user_id", -1)
	if err != nil {
		return nil, badRequest{err}
	}
	text := param(r, "text")
	if text == "" {
		text = "a post by user " + strconv.Itoa(user) + " at " + time.Now().UTC().Format(time.RFC3339Nano)
	}
	begin := time.Now()
	var p post
	err = a.pg.QueryRow(ctx, "INSERT INTO posts (user_id, text) VALUES ($1, $2) RETURNING id", user, text).Scan(&p.ID)
	t.pg += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	p.UserID, p.Text = user, text
	body, _ := json.Marshal(p)
	begin = time.Now()
	err = a.mc.Set(&memcache.Item{Key: "post:" + strconv.FormatInt(p.ID, 10), Value: body})
	t.memcached += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	followers, err := a.followers(ctx, t, user)
	if err != nil {
		return nil, err
	}
	// fan out to the author's user timeline and every follower's home timeline in one round trip
	begin = time.Now()
	pipe := a.rdb.Pipeline()
	pipe.LPush(ctx, "ut:"+strconv.Itoa(user), p.ID)
	pipe.LTrim(ctx, "ut:"+strconv.Itoa(user), 0, timelineLength-1)
	for _, f := range followers {
		pipe.LPush(ctx, "ht:"+strconv.Itoa(f), p.ID)
		pipe.LTrim(ctx, "ht:"+strconv.Itoa(f), 0, timelineLength-1)
	}
	_, err = pipe.Exec(ctx)
	t.redis += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return map[string]any{"post_id": p.ID, "fanout": len(followers)}, nil
}

func (a *app) follow(ctx context.Context, t *timing, r *http.Request) (any, error) {
	user, err := intParam(r, "user_id", -1)
	if err != nil {
		return nil, badRequest{err}
	}
	followee, err := intParam(r, "followee_id", -1)
	if err != nil {
		return nil, badRequest{err}
	}
	begin := time.Now()
	_, err = a.pg.Exec(ctx, "INSERT INTO follows (follower, followee) VALUES ($1, $2) ON CONFLICT DO NOTHING", user, followee)
	t.pg += time.Since(begin)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	begin = time.Now()
	err = a.mc.Delete("followers:" + strconv.Itoa(followee))
	t.memcached += time.Since(begin)
	if err != nil && err != memcache.ErrCacheMiss {
		return nil, fmt.Errorf("memcached: %w", err)
	}
	return map[string]any{"followed": followee}, nil
}

type badRequest struct{ error }

type handlerFunc func(context.Context, *timing, *http.Request) (any, error)

func (a *app) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		begin := time.Now()
		ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
		defer cancel()
		var t timing
		result, err := h(ctx, &t, r)
		w.Header().Set("Server-Timing", t.header(time.Since(begin)))
		if err != nil {
			status := http.StatusInternalServerError
			if _, ok := err.(badRequest); ok {
				status = http.StatusBadRequest
			} else if a.errors.Add(1) <= 20 {
				log.Printf("%s: %v", r.URL.Path, err)
			}
			http.Error(w, err.Error(), status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(result)
	}
}

// routes maps the paths the load generators request (DeathStarBench's wrk2-api names) to the handlers.
func (a *app) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/wrk2-api/home-timeline/read", a.handle(a.readHomeTimeline))
	mux.HandleFunc("/wrk2-api/user-timeline/read", a.handle(a.readUserTimeline))
	mux.HandleFunc("/wrk2-api/post/compose", a.handle(a.composePost))
	mux.HandleFunc("/wrk2-api/user/follow", a.handle(a.follow))
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux
}

type config struct {
	pg, redis, memcached string
}

func connect(ctx context.Context, c config, poolSize int) (*pgxpool.Pool, *redis.Client, error) {
	pgConfig, err := pgxpool.ParseConfig(c.pg)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres address: %w", err)
	}
	pgConfig.MaxConns = int32(poolSize)
	pool, err := pgxpool.NewWithConfig(ctx, pgConfig)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: c.redis, PoolSize: poolSize})
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, nil, fmt.Errorf("redis: %w", err)
	}
	return pool, rdb, nil
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve HTTP on")
	var c config
	fs.StringVar(&c.pg, "pg", "", "PostgreSQL connection string")
	fs.StringVar(&c.redis, "redis", "", "Redis address host:port")
	fs.StringVar(&c.memcached, "memcached", "", "memcached address host:port")
	poolSize := fs.Int("pool", 32, "connections per backing store")
	timeout := fs.Duration("timeout", 3*time.Second, "deadline of one request's work")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	pool, rdb, err := connect(ctx, c, *poolSize)
	cancel()
	if err != nil {
		return err
	}
	mc := memcache.New(c.memcached)
	mc.MaxIdleConns = *poolSize
	mc.Timeout = *timeout
	if err := mc.Ping(); err != nil {
		return fmt.Errorf("memcached: %w", err)
	}
	a := &app{pg: pool, rdb: rdb, mc: mc, timeout: *timeout}
	server := &http.Server{Addr: *listen, Handler: a.routes(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	log.Printf("socialnet serving on %s", *listen)
	return server.ListenAndServe()
}

// seed creates the schema and loads a deterministic dataset: users, a follow graph whose in-degree
// is heavy-tailed (Zipf: a few users have most followers), posts, and the Redis timelines built
// from them.
func seed(args []string) error {
	fs := flag.NewFlagSet("seed", flag.ExitOnError)
	var c config
	fs.StringVar(&c.pg, "pg", "", "PostgreSQL connection string")
	fs.StringVar(&c.redis, "redis", "", "Redis address host:port")
	users := fs.Int("users", 1000, "number of users (ids 0..users-1)")
	postsPerUser := fs.Int("posts", 10, "posts per user")
	meanFollows := fs.Int("follows", 20, "mean number of users each user follows")
	zipfS := fs.Float64("zipf", 1.2, "Zipf exponent of followee popularity (> 1)")
	randomSeed := fs.Int64("seed", 1, "random seed")
	_ = fs.Parse(args)
	if *users < 2 || *postsPerUser < 1 || *meanFollows < 1 || *zipfS <= 1 {
		return fmt.Errorf("users >= 2, posts >= 1, follows >= 1, zipf > 1 required")
	}
	ctx := context.Background()
	pool, rdb, err := connect(ctx, c, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE users, follows, posts RESTART IDENTITY"); err != nil {
		return err
	}
	data := generateDataset(*users, *postsPerUser, *meanFollows, *zipfS, *randomSeed)
	userRows := make([][]any, *users)
	for u := 0; u < *users; u++ {
		userRows[u] = []any{int32(u), "user" + strconv.Itoa(u)}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "name"}, pgx.CopyFromRows(userRows)); err != nil {
		return fmt.Errorf("users: %w", err)
	}
	followRows := make([][]any, len(data.follows))
	for i, f := range data.follows {
		followRows[i] = []any{f[0], f[1]}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"follows"}, []string{"follower", "followee"}, pgx.CopyFromRows(followRows)); err != nil {
		return fmt.Errorf("follows: %w", err)
	}
	postRows := make([][]any, len(data.posts))
	for i, p := range data.posts {
		postRows[i] = []any{p.id, int32(p.author), p.text}
	}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"posts"}, []string{"id", "user_id", "text"}, pgx.CopyFromRows(postRows)); err != nil {
		return fmt.Errorf("posts: %w", err)
	}
	total := len(data.posts)
	if _, err := pool.Exec(ctx, "SELECT setval('posts_id_seq', $1); ANALYZE", int64(total)); err != nil {
		// ANALYZE in the same simple-protocol string is not allowed with parameters; run it apart
		if _, err := pool.Exec(ctx, "SELECT setval('posts_id_seq', $1)", int64(total)); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, "ANALYZE"); err != nil {
			return err
		}
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	// timelines, newest first: posts are numbered in time order
	pipe := rdb.Pipeline()
	queued := 0
	for _, p := range data.posts {
		pipe.LPush(ctx, "ut:"+strconv.Itoa(p.author), p.id)
		for _, f := range data.followers[p.author] {
			pipe.LPush(ctx, "ht:"+strconv.Itoa(f), p.id)
		}
		queued += 1 + len(data.followers[p.author])
		if queued > 5000 {
			if _, err := pipe.Exec(ctx); err != nil {
				return fmt.Errorf("redis: %w", err)
			}
			queued = 0
		}
	}
	for u := 0; u < *users; u++ {
		pipe.LTrim(ctx, "ht:"+strconv.Itoa(u), 0, timelineLength-1)
		pipe.LTrim(ctx, "ut:"+strconv.Itoa(u), 0, timelineLength-1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	summary, _ := json.Marshal(map[string]any{"users": *users, "follows": len(data.follows), "posts": total,
		"max_followers": data.maxFollowers()})
	fmt.Println(string(summary))
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: socialnet serve|seed [flags] (-h for the flags)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "seed":
		err = seed(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q: use serve or seed\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "socialnet:", err)
		os.Exit(1)
	}
}
