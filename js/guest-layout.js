// The fixed guest layout every native backend gives its sandboxes (src/guest_layout.rs), as
// DOCKER_SANDBOX_GUEST and KUBERNETES_SANDBOX_GUEST export it.
import { deepFreeze } from './freeze.js';
import { native } from './native.js';

const layout = native.dockerGuestLayout();

export const GUEST_LAYOUT = deepFreeze({
  workspace: layout.workspace,
  home: layout.home,
  tmpdir: layout.tmpdir,
  HOME: layout.home,
  TMPDIR: layout.tmpdir,
  PATH: layout.path,
  env: { HOME: layout.home, TMPDIR: layout.tmpdir, PATH: layout.path },
});
