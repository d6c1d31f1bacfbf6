package main

// What HttpGateway routes are made of: matches, backends, header mutation.

import "fmt"

// routeMatch: one of pathPrefix, path or regex (default pathPrefix: /), and header matchers.
func routeMatch(doc *document, spec any, at string) (m, bool) {
	mt := obj{"headers": []any{}}
	if spec != nil {
		mt = spec.(obj)
	}
	set := 0
	for _, k := range []string{"pathPrefix", "path", "regex"} {
		if mt[k] != nil {
			set++
		}
	}
	if set > 1 {
		panic(doc.error(at+".match", "set one of pathPrefix, path or regex, not several"))
	}
	var match m
	switch {
	case mt["pathPrefix"] != nil:
		doc.expect(at+".match.pathPrefix", checkPath(mt["pathPrefix"].(string)))
		match = m{"prefix": mt["pathPrefix"]}
	case mt["path"] != nil:
		doc.expect(at+".match.path", checkPath(mt["path"].(string)))
		match = m{"path": mt["path"]}
	case mt["regex"] != nil:
		doc.expect(at+".match.regex", checkRegex(mt["regex"].(string)))
		match = m{"safe_regex": m{"regex": mt["regex"]}}
	default:
		match = m{"prefix": "/"}
	}
	if headers := mt["headers"].([]any); len(headers) > 0 {
		out := make([]any, len(headers))
		for i, h := range headers {
			out[i] = headerMatch(doc, h.(obj), fmt.Sprintf("%s.match.headers[%d]", at, i))
		}
		match["headers"] = out
	}
	return match, mt["regex"] != nil
}

func headerMatch(doc *document, h obj, at string) m {
	doc.expect(at+".name", checkHeaderName(h["name"].(string), false))
	set := 0
	for _, k := range []string{"exact", "prefix", "regex", "present"} {
		if h[k] != nil {
			set++
		}
	}
	if set != 1 {
		panic(doc.error(at, "set exactly one of exact, prefix, regex or present"))
	}
	invert := h["invert"].(bool)
	out := m{"name": h["name"]}
	switch {
	case h["exact"] != nil:
		doc.expect(at+".exact", checkHeaderValue(h["exact"].(string)))
		out["string_match"] = m{"exact": h["exact"]}
	case h["prefix"] != nil:
		doc.expect(at+".prefix", checkHeaderValue(h["prefix"].(string)))
		out["string_match"] = m{"prefix": h["prefix"]}
	case h["regex"] != nil:
		doc.expect(at+".regex", checkRegex(h["regex"].(string)))
		out["string_match"] = m{"safe_regex": m{"regex": h["regex"]}}
	default:
		// `present: false` matches requests without the header.
		invert = invert != (h["present"] == false)
		out["present_match"] = true
	}
	if invert {
		out["invert_match"] = true
	}
	return out
}

// checkBackends: not empty, valid service names listed once, weights at least 1.
func checkBackends(doc *document, backends []any, at string) {
	if len(backends) == 0 {
		panic(doc.error(at, "list at least one backend service"))
	}
	total := uint64(0)
	seen := map[string]bool{}
	for i, x := range backends {
		b := x.(obj)
		service := b["service"].(string)
		doc.expect(fmt.Sprintf("%s[%d].service", at, i), checkName(service))
		if len(backends) > 1 && seen[service] {
			panic(doc.error(fmt.Sprintf("%s[%d].service", at, i), debug(service)+" is listed twice"))
		}
		seen[service] = true
		weight := weightOf(b)
		doc.expect(fmt.Sprintf("%s[%d].weight", at, i), checkWeight(weight))
		total += weight
	}
	if total > 0xffff_ffff {
		panic(doc.error(at, "the weights add up to more than 4294967295"))
	}
}

func weightOf(b obj) uint64 {
	if w := b["weight"]; w != nil {
		return u64(w)
	}
	return 1
}

// toBackends: one backend is a plain cluster, several a weighted split.
func toBackends(doc *document, backends []any, at string) m {
	checkBackends(doc, backends, at)
	if len(backends) == 1 {
		return m{"cluster": backends[0].(obj)["service"]}
	}
	clusters := make([]any, len(backends))
	for i, x := range backends {
		b := x.(obj)
		clusters[i] = m{"name": b["service"], "weight": weightOf(b)}
	}
	return m{"weighted_clusters": m{"clusters": clusters}}
}

// mutate applies requestHeaders (request) or responseHeaders to a route or virtual host:
// set, then add (each in name order), then remove.
func mutate(doc *document, target m, spec any, request bool, at string) {
	if spec == nil {
		return
	}
	h := spec.(obj)
	side := "response"
	if request {
		side = "request"
	}
	toAdd := func(option m) {
		list, _ := target[side+"_headers_to_add"].([]any)
		target[side+"_headers_to_add"] = append(list, option)
	}
	for _, e := range h["set"].([]kv) {
		doc.expect(at+".set", checkHeaderName(e.key, true))
		doc.expect(at+".set."+e.key, checkHeaderValue(e.value.(string)))
		toAdd(headerValueOption(e.key, e.value.(string), true))
	}
	for _, e := range h["add"].([]kv) {
		doc.expect(at+".add", checkHeaderName(e.key, true))
		doc.expect(at+".add."+e.key, checkHeaderValue(e.value.(string)))
		toAdd(headerValueOption(e.key, e.value.(string), false))
	}
	for i, x := range h["remove"].([]any) {
		name := x.(string)
		doc.expect(fmt.Sprintf("%s.remove[%d]", at, i), checkHeaderName(name, true))
		list, _ := target[side+"_headers_to_remove"].([]any)
		target[side+"_headers_to_remove"] = append(list, name)
	}
}
