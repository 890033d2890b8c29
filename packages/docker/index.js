// native-sandbox-docker: the root of `native-sandbox/docker`, as the original's separate Docker
// package. Installed beside an alias of native-sandbox, both copies share one runtime (one addon,
// the same error classes), so errors and sandboxes cross between them.
export * from 'native-sandbox/docker';
