"""Generated code of the driver sidecar protocol; see hack/gen-proto.sh."""
