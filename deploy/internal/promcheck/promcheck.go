// Package promcheck reads the queries out of the deploy/ files that hold
// PromQL (the Grafana dashboard and the Prometheus alert rules) and asks a
// running Prometheus whether each returns series.
//
// An alert's expression usually ends in a threshold (`x > 10`) and returns
// nothing while all is well, so the query checked for an alert is its
// expression with a top-level comparison against a number removed: the
// measure the alert watches. Every metric selector inside a query is also
// checked on its own, which names the one metric or label that matches
// nothing when a query comes back empty.
package promcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// Query is one PromQL expression and where it comes from.
type Query struct {
	Source string // "dashboard: PANEL [REF]" or "alert: NAME"
	Expr   string
}

// DashboardQueries returns the expression of every target of every panel of
// a Grafana dashboard JSON file (panels inside rows included), with
// Grafana's $__rate_interval, $__interval and $__range replaced by
// rateInterval, so that Prometheus can run them.
func DashboardQueries(path, rateInterval string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decode dashboard %s: %w", path, err)
	}
	var qs []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				return fmt.Errorf("dashboard %s: panel %q has no query", path, p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					return fmt.Errorf("dashboard %s: panel %q target %s has an empty expression", path, p.Title, tg.RefID)
				}
				e := strings.NewReplacer("$__rate_interval", rateInterval, "$__interval", rateInterval, "$__range", rateInterval).Replace(tg.Expr)
				qs = append(qs, Query{Source: fmt.Sprintf("dashboard: %s [%s]", p.Title, tg.RefID), Expr: e})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return qs, nil
}

type panel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// Alert is one alerting rule of a Prometheus rule file.
type Alert struct {
	Name string `yaml:"alert"`
	Expr string `yaml:"expr"`
}

// Alerts returns the alerting rules of a Prometheus rule file.
func Alerts(path string) ([]Alert, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	var f struct {
		Groups []struct {
			Rules []Alert `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decode rules %s: %w", path, err)
	}
	var as []Alert
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Name != "" {
				as = append(as, r)
			}
		}
	}
	return as, nil
}

// ErrNoThreshold is returned by Measures for an expression that is not a
// comparison (or a union of comparisons).
var ErrNoThreshold = errors.New("not a comparison against a number or another measure")

var promql = parser.NewParser(parser.Options{})

// Measures returns what an alert expression compares, each as a query that
// returns series exactly when the measure exists: `A > 10` and `10 < A` give
// `A`; `A < B` between two measures gives `A - B` with the comparison's
// vector matching (series only where both sides have matching labels); each
// side of an `or` gives its own measures.
func Measures(expr string) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	out, err := measures(e)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return out, nil
}

func measures(e parser.Expr) ([]string, error) {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			break
		}
		e = p.Expr
	}
	b, ok := e.(*parser.BinaryExpr)
	if !ok {
		return nil, ErrNoThreshold
	}
	if b.Op == parser.LOR {
		l, err := measures(b.LHS)
		if err != nil {
			return nil, err
		}
		r, err := measures(b.RHS)
		if err != nil {
			return nil, err
		}
		return append(l, r...), nil
	}
	if !b.Op.IsComparisonOperator() || b.ReturnBool {
		return nil, ErrNoThreshold
	}
	if _, isNum := b.RHS.(*parser.NumberLiteral); isNum {
		return []string{b.LHS.String()}, nil
	}
	if _, isNum := b.LHS.(*parser.NumberLiteral); isNum {
		return []string{b.RHS.String()}, nil
	}
	diff := *b
	diff.Op = parser.SUB
	return []string{diff.String()}, nil
}

// Selectors returns every metric selector in expr (range selectors as
// their instant form), each as a query of its own.
func Selectors(expr string) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			c := *vs
			c.OriginalOffset, c.Offset, c.Timestamp, c.StartOrEnd = 0, 0, nil, 0
			out = append(out, c.String())
		}
		return nil
	})
	return out, nil
}

// Client queries a Prometheus server's HTTP API.
type Client struct {
	Base string // http://host:port
	HTTP *http.Client
}

// ErrQuery is returned for a query Prometheus refused or failed.
var ErrQuery = errors.New("prometheus query failed")

// Series runs an instant query and returns how many series (or, for a
// scalar, 1) it returned.
func (c *Client) Series(ctx context.Context, query string) (int, error) {
	u := c.Base + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("query %q: %w", query, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("query %q: %w", query, err)
	}
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return 0, fmt.Errorf("query %q: decode %q: %w", query, body, err)
	}
	if ans.Status != "success" {
		return 0, fmt.Errorf("query %q: %s: %w", query, ans.Error, ErrQuery)
	}
	switch ans.Data.ResultType {
	case "vector", "matrix":
		var rs []json.RawMessage
		if err := json.Unmarshal(ans.Data.Result, &rs); err != nil {
			return 0, fmt.Errorf("query %q: decode result: %w", query, err)
		}
		return len(rs), nil
	default: // scalar, string
		return 1, nil
	}
}
