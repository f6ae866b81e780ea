# Written by `agentbox setup`; `agentbox cleanup` removes it.
# binary: /usr/local/bin/agentbox
#
# Lets this binary create user namespaces where
# kernel.apparmor_restrict_unprivileged_userns restricts them; it confines
# nothing else, like the profiles Ubuntu ships for bwrap and chrome.

abi <abi/4.0>,
include <tunables/global>

profile agentbox "/usr/local/bin/agentbox" flags=(unconfined) {
  userns,

  # Site-specific additions and overrides. See local/README for details.
  include if exists <local/agentbox>
}
