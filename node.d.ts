/**
 * native-sandbox/node: not built yet; this entry point exports nothing until it is.
 * See the README's "Status" section for what each entry point holds today.
 */
export {};
