package main

// `HttpGateway` -> a Listener (RDS over ADS) and its RouteConfiguration, both named after the
// document.

import (
	"fmt"
	"strings"

	xdst "xdst.dev/guest"
)

const defaultRetryOn = "5xx,connect-failure,reset"

func translateGateway(doc *document, out *xdst.Response) {
	spec := doc.spec(gatewaySpec)
	address := "0.0.0.0"
	if a := spec["address"]; a != nil {
		address = a.(string)
	}
	doc.expect("spec.address", checkIP(address))
	hosts := spec["hosts"].([]any)
	if len(hosts) == 0 {
		panic(doc.error("spec.hosts", "list at least one host"))
	}
	domains := map[string]bool{}
	names := map[string]bool{}
	vhosts := make([]any, len(hosts))
	for h, x := range hosts {
		host := x.(obj)
		at := fmt.Sprintf("spec.hosts[%d]", h)
		hostnames := []any{"*"}
		if hn := host["hostnames"]; hn != nil {
			hostnames = hn.([]any)
		}
		if len(hostnames) == 0 {
			panic(doc.error(at+".hostnames", "list at least one hostname (or leave hostnames out to match any)"))
		}
		for i, y := range hostnames {
			d := y.(string)
			doc.expect(fmt.Sprintf("%s.hostnames[%d]", at, i), checkDomain(d))
			if domains[asciiLowercase(d)] {
				panic(doc.error(fmt.Sprintf("%s.hostnames[%d]", at, i), debug(d)+" is listed more than once in this gateway"))
			}
			domains[asciiLowercase(d)] = true
		}
		if n := host["name"]; n != nil {
			doc.expect(at+".name", checkName(n.(string)))
		}
		name := hostnames[0].(string)
		if n := host["name"]; n != nil {
			name = n.(string)
		}
		if names[name] {
			panic(doc.error(at+".name", "another host is already named "+debug(name)))
		}
		names[name] = true
		routes := host["routes"].([]any)
		if len(routes) == 0 {
			panic(doc.error(at+".routes", "list at least one route"))
		}
		vhost := m{"name": name, "domains": hostnames}
		mutate(doc, vhost, host["requestHeaders"], true, at+".requestHeaders")
		mutate(doc, vhost, host["responseHeaders"], false, at+".responseHeaders")
		built := make([]any, len(routes))
		for r, route := range routes {
			built[r] = httpRoute(doc, route.(obj), fmt.Sprintf("%s.routes[%d]", at, r))
		}
		vhost["routes"] = built
		vhosts[h] = vhost
	}
	add(out, listenerType, doc.name, httpListener(doc.name, address, u64(spec["port"])), doc.id())
	add(out, routeConfigType, doc.name, m{"name": doc.name, "virtual_hosts": vhosts}, doc.id())
}

func httpRoute(doc *document, spec obj, at string) m {
	match, isRegex := routeMatch(doc, spec["match"], at)
	route := m{"match": match}
	if n := spec["name"]; n != nil {
		route["name"] = n
	}
	backends, direct := spec["backends"], spec["directResponse"]
	var action m
	switch {
	case backends != nil && direct != nil:
		panic(doc.error(at+".directResponse", "set backends or directResponse, not both"))
	case backends == nil && direct == nil:
		panic(doc.error(at+".backends", "missing: the services to send requests to (or a directResponse)"))
	case backends != nil:
		action = toBackends(doc, backends.([]any), at+".backends")
	default:
		route["direct_response"] = directResponse(doc, spec, at)
	}
	if action != nil {
		if v := spec["timeout"]; v != nil {
			action["timeout"] = duration(v)
		}
		if v := spec["idleTimeout"]; v != nil {
			action["idle_timeout"] = duration(v)
		}
		if v := spec["retries"]; v != nil {
			action["retry_policy"] = httpRetries(doc, v.(obj), at+".retries")
		}
		if v := spec["rewrite"]; v != nil {
			if isRegex {
				panic(doc.error(at+".rewrite.pathPrefix", "needs a pathPrefix or path match, not a regex"))
			}
			prefix := v.(obj)["pathPrefix"].(string)
			doc.expect(at+".rewrite.pathPrefix", checkPath(prefix))
			action["prefix_rewrite"] = prefix
		}
		route["route"] = action
	}
	mutate(doc, route, spec["requestHeaders"], true, at+".requestHeaders")
	mutate(doc, route, spec["responseHeaders"], false, at+".responseHeaders")
	return route
}

func directResponse(doc *document, spec obj, at string) m {
	d := spec["directResponse"].(obj)
	status := u64(d["status"])
	if status < 200 || status > 599 {
		panic(doc.error(at+".directResponse.status", "must be an HTTP status between 200 and 599"))
	}
	if spec["timeout"] != nil || spec["idleTimeout"] != nil || spec["retries"] != nil || spec["rewrite"] != nil {
		panic(doc.error(at+".directResponse", "timeout, idleTimeout, retries and rewrite apply to backends, not to a directResponse"))
	}
	out := m{"status": status}
	if b := d["body"]; b != nil {
		out["body"] = m{"inline_string": b}
	}
	return out
}

func httpRetries(doc *document, spec obj, at string) m {
	attempts := uint64(1)
	if a := spec["attempts"]; a != nil {
		attempts = u64(a)
	}
	if attempts == 0 {
		panic(doc.error(at+".attempts", "must be at least 1 (leave retries out for none)"))
	}
	condition := defaultRetryOn
	if o := spec["on"]; o != nil {
		condition = o.(string)
	}
	on, problem := retryOn(condition, httpRetryOn)
	doc.expect(at+".on", problem)
	codes := spec["statusCodes"].([]any)
	for i, c := range codes {
		if code := u64(c); code < 100 || code > 599 {
			panic(doc.error(fmt.Sprintf("%s.statusCodes[%d]", at, i), "must be an HTTP status between 100 and 599"))
		}
	}
	policy := m{"retry_on": on, "num_retries": attempts}
	hasRetriable := false
	for _, c := range strings.Split(on, ",") {
		hasRetriable = hasRetriable || c == "retriable-status-codes"
	}
	if len(codes) > 0 && !hasRetriable {
		policy["retry_on"] = on + ",retriable-status-codes"
	}
	if v := spec["perTryTimeout"]; v != nil {
		doc.expect(at+".perTryTimeout", checkPositive(v))
		policy["per_try_timeout"] = duration(v)
	}
	if len(codes) > 0 {
		policy["retriable_status_codes"] = codes
	}
	return policy
}
