package main

// Envoy resources as canonical proto3 JSON, shaped as the Rust SDK's builders shape them.
// Field presence matters, key order does not: the host re-encodes each resource.

import "math/big"

const (
	typeURL            = "type.googleapis.com/"
	clusterType        = typeURL + "envoy.config.cluster.v3.Cluster"
	loadAssignmentType = typeURL + "envoy.config.endpoint.v3.ClusterLoadAssignment"
	listenerType       = typeURL + "envoy.config.listener.v3.Listener"
	routeConfigType    = typeURL + "envoy.config.route.v3.RouteConfiguration"
	hcmType            = typeURL + "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
	routerType         = typeURL + "envoy.extensions.filters.http.router.v3.Router"
)

type m = map[string]any

func duration(d any) string { return formatDuration(d.(*big.Int)) }

// ads: fetch over the client's ADS stream.
func ads() m { return m{"ads": m{}, "resource_api_version": "V3"} }

func socketAddress(ip string, port uint64) m {
	return m{"socket_address": m{"address": ip, "port_value": port}}
}

// edsCluster: endpoints by EDS over ADS, in a ClusterLoadAssignment of its name.
func edsCluster(name string) m {
	return m{"name": name, "type": "EDS", "eds_cluster_config": m{"eds_config": ads()}}
}

// healthCheck: every 10s, 1s timeout, healthy after 1, unhealthy after 3, and the checker.
func healthCheck(checker m) m {
	hc := m{"timeout": "1s", "interval": "10s", "healthy_threshold": 1, "unhealthy_threshold": 3}
	for k, v := range checker {
		hc[k] = v
	}
	return hc
}

func lbEndpoint(ip string, port uint64, weight any) m {
	e := m{"endpoint": m{"address": socketAddress(ip, port)}}
	if weight != nil {
		e["load_balancing_weight"] = weight
	}
	return e
}

// localityEndpoints: the (possibly empty) locality is always set.
func localityEndpoints(region, zone, subZone string, weight, priority uint64, endpoints []any) m {
	return m{
		"locality":              m{"region": region, "zone": zone, "sub_zone": subZone},
		"load_balancing_weight": weight,
		"priority":              priority,
		"lb_endpoints":          endpoints,
	}
}

// httpListener: one filter chain with an HttpConnectionManager fetching its routes by RDS over
// ADS (route configuration and stat prefix named like the listener) and the router.
func httpListener(name, address string, port uint64) m {
	hcm := m{
		"@type":        hcmType,
		"stat_prefix":  name,
		"rds":          m{"config_source": ads(), "route_config_name": name},
		"http_filters": []any{m{"name": "envoy.filters.http.router", "typed_config": m{"@type": routerType}}},
	}
	return m{
		"name":          name,
		"address":       socketAddress(address, port),
		"filter_chains": []any{m{"filters": []any{m{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}}}},
	}
}

func headerValueOption(key, value string, overwrite bool) m {
	action := "APPEND_IF_EXISTS_OR_ADD"
	if overwrite {
		action = "OVERWRITE_IF_EXISTS_OR_ADD"
	}
	return m{"header": m{"key": key, "value": value}, "append_action": action}
}
