package main

// `Service` -> an EDS Cluster and its ClusterLoadAssignment, both named after the document.

import (
	"fmt"
	"net/netip"
	"sort"

	xdst "xdst.dev/guest"
)

var lbPolicy = map[string]string{
	"roundRobin": "ROUND_ROBIN", "leastRequest": "LEAST_REQUEST", "random": "RANDOM", "ringHash": "RING_HASH", "maglev": "MAGLEV",
}

func u64(v any) uint64 { return v.(uint64) }

func translateService(doc *document, out *xdst.Response) {
	spec := doc.spec(serviceSpec)
	http2 := spec["protocol"] == "http2" || spec["protocol"] == "grpc"

	cluster := edsCluster(doc.name)
	cluster["lb_policy"] = lbPolicy[spec["loadBalancing"].(string)]
	if ct := spec["connectTimeout"]; ct != nil {
		doc.expect("spec.connectTimeout", checkPositive(ct))
		cluster["connect_timeout"] = duration(ct)
	}
	if http2 {
		cluster["http2_protocol_options"] = m{}
	}
	localities := spec["localities"].([]any)
	if len(localities) > 0 {
		cluster["common_lb_config"] = m{"locality_weighted_lb_config": m{}}
	}
	if hc := spec["healthCheck"]; hc != nil {
		cluster["health_checks"] = []any{healthCheckOf(doc, hc.(obj), http2)}
	}
	if cb := spec["circuitBreakers"]; cb != nil {
		cluster["circuit_breakers"] = m{"thresholds": []any{thresholds(cb.(obj))}}
	}
	endpoints := loadAssignment(doc, spec["endpoints"].([]any), localities, out)
	add(out, clusterType, doc.name, cluster, doc.id())
	add(out, loadAssignmentType, doc.name, endpoints, doc.id())
}

func add(out *xdst.Response, typeURL, name string, message m, document string) {
	r, err := xdst.NewResource(typeURL, name, document, message)
	if err != nil {
		panic(failure{xdst.Errorf(document, "", "%v", err)})
	}
	out.Resources = append(out.Resources, r)
}

type endpointKey struct {
	ip   netip.Addr
	port uint64
}

func loadAssignment(doc *document, endpoints, localities []any, out *xdst.Response) m {
	if len(endpoints) > 0 && len(localities) > 0 {
		panic(doc.error("spec.localities", "put endpoints either in spec.endpoints or in spec.localities, not both"))
	}
	seen := map[endpointKey]bool{}
	groups := []any{}
	count := len(endpoints)
	if len(endpoints) > 0 {
		lb := make([]any, len(endpoints))
		for i, e := range endpoints {
			lb[i] = endpoint(doc, e.(obj), seen, fmt.Sprintf("spec.endpoints[%d]", i))
		}
		groups = append(groups, localityEndpoints("", "", "", 1, 0, lb))
	}
	places := map[[3]string]bool{}
	priorities := map[uint64]bool{}
	for l, x := range localities {
		loc := x.(obj)
		at := fmt.Sprintf("spec.localities[%d]", l)
		place := [3]string{loc["region"].(string), loc["zone"].(string), loc["subZone"].(string)}
		if places[place] {
			panic(doc.error(at, "another locality has the same region, zone and subZone"))
		}
		places[place] = true
		weight := uint64(1)
		if w := loc["weight"]; w != nil {
			weight = u64(w)
		}
		doc.expect(at+".weight", checkWeight(weight))
		priorities[u64(loc["priority"])] = true
		eps := loc["endpoints"].([]any)
		count += len(eps)
		lb := make([]any, len(eps))
		for i, e := range eps {
			lb[i] = endpoint(doc, e.(obj), seen, fmt.Sprintf("%s.endpoints[%d]", at, i))
		}
		groups = append(groups, localityEndpoints(place[0], place[1], place[2], weight, u64(loc["priority"]), lb))
	}
	// Priorities must run 0, 1, 2, ... without gaps.
	sorted := make([]uint64, 0, len(priorities))
	for p := range priorities {
		sorted = append(sorted, p)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	for i, p := range sorted {
		if p != uint64(i) {
			missing := uint64(i)
			l := 0
			for j, x := range localities {
				if u64(x.(obj)["priority"]) > missing {
					l = j
					break
				}
			}
			panic(doc.error(fmt.Sprintf("spec.localities[%d].priority", l),
				fmt.Sprintf("priorities must run 0, 1, 2, ... without gaps, and no locality has priority %d", missing)))
		}
	}
	if count == 0 {
		out.Diagnostics = append(out.Diagnostics, doc.warning("spec.endpoints", "no endpoints: requests to this service fail until it has some"))
	}
	return m{"cluster_name": doc.name, "endpoints": groups}
}

func endpoint(doc *document, e obj, seen map[endpointKey]bool, at string) m {
	address, port := e["address"].(string), u64(e["port"])
	doc.expect(at+".address", checkIP(address))
	ip, _ := parseIP(address)
	key := endpointKey{ip, port}
	if seen[key] {
		panic(doc.error(at, fmt.Sprintf("%s:%d is listed twice", address, port)))
	}
	seen[key] = true
	if w := e["weight"]; w != nil {
		doc.expect(at+".weight", checkWeight(u64(w)))
	}
	return lbEndpoint(address, port, e["weight"])
}

func healthCheckOf(doc *document, spec obj, http2 bool) m {
	const at = "spec.healthCheck"
	var checker m
	path, grpc, host := spec["path"], spec["grpc"], spec["host"]
	switch {
	case path != nil && grpc == nil:
		doc.expect(at+".path", checkPath(path.(string)))
		h := m{"path": path}
		if http2 {
			h["codec_client_type"] = "HTTP2"
		}
		if host != nil {
			doc.expect(at+".host", checkDomain(host.(string)))
			h["host"] = host
		}
		checker = m{"http_health_check": h}
	case path == nil && grpc != nil:
		if !http2 {
			panic(doc.error(at+".grpc", "gRPC health checks need protocol http2 or grpc"))
		}
		if host != nil {
			panic(doc.error(at+".host", "applies to HTTP checks (path) only"))
		}
		checker = m{"grpc_health_check": m{"service_name": grpc.(obj)["serviceName"]}}
	default:
		panic(doc.error(at, "set path (an HTTP check) or grpc (the gRPC health checking protocol), one of them"))
	}
	hc := healthCheck(checker)
	if v := spec["interval"]; v != nil {
		doc.expect(at+".interval", checkPositive(v))
		hc["interval"] = duration(v)
	}
	if v := spec["timeout"]; v != nil {
		doc.expect(at+".timeout", checkPositive(v))
		hc["timeout"] = duration(v)
	}
	if v := spec["healthyThreshold"]; v != nil {
		doc.expect(at+".healthyThreshold", checkAtLeastOne(u64(v)))
		hc["healthy_threshold"] = v
	}
	if v := spec["unhealthyThreshold"]; v != nil {
		doc.expect(at+".unhealthyThreshold", checkAtLeastOne(u64(v)))
		hc["unhealthy_threshold"] = v
	}
	return hc
}

// thresholds: circuit breaker limits for the default priority; unset ones keep Envoy's.
func thresholds(spec obj) m {
	t := m{}
	for _, k := range [][2]string{{"maxConnections", "max_connections"}, {"maxPendingRequests", "max_pending_requests"}, {"maxRequests", "max_requests"}, {"maxRetries", "max_retries"}} {
		if v := spec[k[0]]; v != nil {
			t[k[1]] = v
		}
	}
	return t
}
