// native-sandbox/acp: not built yet. This entry point exports nothing until its issue lands,
// so an import of a missing name fails loudly instead of reaching a stub.
export {};
