"""Writes upstream-tests.json: the facts of the upstream Gateway API conformance suite that the
conformance report is computed from: every test's ShortName, features, Provisional flag and the
case folders of its manifests (as ../shared/gateway-api-suite names them), and each profile's
core and extended features. Run it in a checkout of kubernetes-sigs/gateway-api:

    cd gateway-api && git checkout 4564255ac2c35d582249b3cdf261bdf51c8bca32
    python3 /path/to/xdst/plugins/gateway-api/conformance/extract-upstream.py > upstream-tests.json

It reads the Go sources as text (the FeatureName constants, the Feature values, the feature
sets of pkg/features, and the ConformanceTest values of conformance/tests); no Go is needed.
"""
import re, subprocess, json, os, sys
def show(path):
    return subprocess.run(['git','show','HEAD:'+path],capture_output=True,text=True,check=True).stdout
files=subprocess.run(['git','ls-tree','--name-only','HEAD','pkg/features/'],capture_output=True,text=True).stdout.split()
consts={}; feats={}; sets={}
for f in files:
    if not f.endswith('.go'): continue
    src=show(f)
    for m in re.finditer(r'(Support\w+)\s+(?:FeatureName\s*)?=\s*"([^"]+)"',src): consts[m.group(1)]=m.group(2)
    for m in re.finditer(r"(\w+)\s*=\s*Feature\{\s*Name:\s*(\w+)",src): feats[m.group(1)]=m.group(2)
    for m in re.finditer(r'var (\w+Features)\s*=\s*sets\.New\(([^)]*)\)',src,re.S):
        items=[x.strip() for x in m.group(2).replace('\n',' ').split(',') if x.strip() and not x.strip().startswith('//')]
        sets[m.group(1)]=items
def names(setname):
    return sorted(consts[feats[i]] for i in sets[setname])
G=names('GatewayExtendedFeatures')
profiles={
 'GATEWAY-HTTP':{'core':['Gateway','ReferenceGrant','HTTPRoute'],'extended':sorted(set(G+names('HTTPRouteExtendedFeatures')+names('BackendTLSPolicyCoreFeatures')+names('BackendTLSPolicyExtendedFeatures')))},
 'GATEWAY-TLS':{'core':['Gateway','ReferenceGrant','TLSRoute'],'extended':sorted(set(G+names('TLSRouteExtendedFeatures')+names('BackendTLSPolicyCoreFeatures')+names('BackendTLSPolicyExtendedFeatures')))},
 'GATEWAY-TCP':{'core':['Gateway','TCPRoute','ReferenceGrant'],'extended':sorted(set(G+names('TCPRouteExtendedFeatures')))},
 'GATEWAY-UDP':{'core':['Gateway','UDPRoute','ReferenceGrant'],'extended':sorted(set(G+names('UDPRouteFeatures')))},
 'GATEWAY-GRPC':{'core':['Gateway','ReferenceGrant','GRPCRoute'],'extended':sorted(set(G+names('BackendTLSPolicyCoreFeatures')+names('BackendTLSPolicyExtendedFeatures')))},
}
# Manifests whose case folder in ../shared/gateway-api-suite is named after the Go file.
RENAMED={'httproute-request-header-modifier-backend':'httproute-backend-request-header-modifier'}
tests=[]
for f in subprocess.run(['git','ls-tree','--name-only','HEAD','conformance/tests/'],capture_output=True,text=True).stdout.split():
    if not f.endswith('.go') or f.endswith('_test.go'): continue
    src=show(f)
    for m in re.finditer(r'(\w+)\s*=\s*(?:confsuite|suite)\.ConformanceTest\{(.*?)\n\tTest:',src,re.S):
        body=m.group(2)
        sn=re.search(r'ShortName:\s*"([^"]+)"',body)
        if not sn: continue
        fs=re.search(r'Features:\s*\[\]features\.FeatureName\{(.*?)\}',body,re.S)
        fl=[consts[x] for x in re.findall(r'features\.(Support\w+)',fs.group(1))] if fs else []
        ms=re.search(r'Manifests:\s*\[\]string\{(.*?)\}',body,re.S)
        stem=os.path.basename(f)[:-3]
        mf=[os.path.basename(x)[:-5] for x in re.findall(r'"([^"]+)"',ms.group(1))] if ms else []
        # A case folder is named after the test's first manifest; two tests share a Go file
        # and name their manifests apart from it.
        mf=[mf[0]] if mf else [stem]
        if mf[0] in RENAMED: mf=[RENAMED[mf[0]]]
        prov=bool(re.search(r'Provisional:\s*true',body))
        tests.append({'name':sn.group(1),'features':fl,'provisional':prov,'cases':mf})
tests.sort(key=lambda t:t['name'])
commit=subprocess.run(['git','rev-parse','HEAD'],capture_output=True,text=True).stdout.strip()
json.dump({'source':'kubernetes-sigs/gateway-api '+commit,'profiles':profiles,'tests':tests},sys.stdout,indent=1)
print()
