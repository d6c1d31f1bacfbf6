package main

// The intent schema of the two kinds this port translates, field by field, as in
// plugins/reference/src/schema.rs. Checks a schema cannot express are in service.go,
// gateway.go and routing.go.

func none() any                 { return []any{} }
func noneMap() any              { return []kv{} }
func emptyStr() any             { return "" }
func zero() any                 { return uint64(0) }
func falseVal() any             { return false }
func constant(v any) func() any { return func() any { return v } }

var endpointSpec = structOf("EndpointSpec",
	req("address", str),
	req("port", port),
	opt("weight", u32),
)

var localitySpec = structOf("LocalitySpec",
	def("region", str, emptyStr),
	def("zone", str, emptyStr),
	def("subZone", str, emptyStr),
	opt("weight", u32),
	def("priority", u32, zero),
	def("endpoints", list(endpointSpec), none),
)

var healthCheckSpec = structOf("HealthCheckSpec",
	opt("path", str),
	opt("host", str),
	opt("grpc", structOf("GrpcHealthCheckSpec", def("serviceName", str, emptyStr))),
	opt("interval", durationOf),
	opt("timeout", durationOf),
	opt("healthyThreshold", u32),
	opt("unhealthyThreshold", u32),
)

var circuitBreakersSpec = structOf("CircuitBreakersSpec",
	opt("maxConnections", u32),
	opt("maxPendingRequests", u32),
	opt("maxRequests", u32),
	opt("maxRetries", u32),
)

// serviceSpec: `kind: Service`, an upstream service and its endpoints.
var serviceSpec = structOf("ServiceSpec",
	def("protocol", oneOfStrings("http1", "http2", "grpc"), constant("http1")),
	def("loadBalancing", oneOfStrings("roundRobin", "leastRequest", "random", "ringHash", "maglev"), constant("roundRobin")),
	opt("connectTimeout", durationOf),
	def("endpoints", list(endpointSpec), none),
	def("localities", list(localitySpec), none),
	opt("healthCheck", healthCheckSpec),
	opt("circuitBreakers", circuitBreakersSpec),
)

var headerMatchSpec = structOf("HeaderMatchSpec",
	req("name", str),
	opt("exact", str),
	opt("prefix", str),
	opt("regex", str),
	opt("present", boolean),
	def("invert", boolean, falseVal),
)

var matchSpec = structOf("MatchSpec",
	opt("pathPrefix", str),
	opt("path", str),
	opt("regex", str),
	def("headers", list(headerMatchSpec), none),
)

var backendSpec = structOf("BackendSpec",
	req("service", str),
	opt("weight", u32),
)

var headersSpec = structOf("HeadersSpec",
	def("set", mapOf(str), noneMap),
	def("add", mapOf(str), noneMap),
	def("remove", list(str), none),
)

var routeSpec = structOf("HttpRouteSpec",
	opt("name", str),
	opt("match", matchSpec),
	opt("backends", list(backendSpec)),
	opt("directResponse", structOf("DirectResponseSpec", req("status", u16), opt("body", str))),
	opt("timeout", durationOf),
	opt("idleTimeout", durationOf),
	opt("retries", structOf("RetriesSpec",
		opt("attempts", u32),
		opt("on", str),
		opt("perTryTimeout", durationOf),
		def("statusCodes", list(u16), none),
	)),
	opt("requestHeaders", headersSpec),
	opt("responseHeaders", headersSpec),
	opt("rewrite", structOf("RewriteSpec", req("pathPrefix", str))),
)

var hostSpec = structOf("HostSpec",
	opt("name", str),
	opt("hostnames", list(str)),
	req("routes", list(routeSpec)),
	opt("requestHeaders", headersSpec),
	opt("responseHeaders", headersSpec),
)

// gatewaySpec: `kind: HttpGateway`, an Envoy listener and its routes.
var gatewaySpec = structOf("GatewaySpec",
	opt("address", str),
	req("port", port),
	req("hosts", list(hostSpec)),
)

// configSpec: the operator's configuration for this plugin: none, so `null` or `{}`.
var configSpec = structOf("Config")
