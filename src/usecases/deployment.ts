/**
 * Rules every instance of a deployment (the instances sharing one database) must apply alike. The
 * notify-URL policy is one: an instance that allowed loopback receivers while the others did not
 * could be made to deliver another instance's events to its own host. The first instance to start
 * records its policy; a later one with another policy is refused at start while an instance with
 * the recorded one is running, and records its own once none is (a deliberate change, made by
 * restarting every instance).
 */
import { ConfigError } from '../config/config.ts';
import type { Clock } from '../domain/clock.ts';
import type { NotifyUrlPolicy } from '../events/notify-url.ts';
import type { Db } from '../store/db.ts';
import { liveInstanceCount } from '../store/replays.ts';
import { getSetting, updateSetting } from '../store/settings.ts';
import { INSTANCE_GONE_AFTER_MS } from './request-units.ts';

const SETTING = 'notify_url_policy';

/** `self`: this instance's id (registered already), not counted among the others. */
export async function agreeOnNotifyUrlPolicy(d: { db: Db; clock: Clock }, mine: NotifyUrlPolicy, self: string): Promise<void> {
  const now = new Date(d.clock.now());
  const stored = await getSetting<NotifyUrlPolicy>(d.db, SETTING);
  const same = (p: NotifyUrlPolicy | null) =>
    p !== null && p.allowLoopback === mine.allowLoopback && p.allowPrivateTargets === mine.allowPrivateTargets;
  if (same(stored)) return;
  if (stored !== null && (await liveInstanceCount(d.db, new Date(now.getTime() - INSTANCE_GONE_AFTER_MS), self)) > 0) {
    throw new ConfigError(
      `WEBHOOK_ALLOW_LOOPBACK / WEBHOOK_ALLOW_PRIVATE_TARGETS: this instance would allow loopback ${mine.allowLoopback} and private targets ${mine.allowPrivateTargets}, ` +
        `but the running instances on this database allow loopback ${stored.allowLoopback} and private targets ${stored.allowPrivateTargets}: ` +
        'start every instance with the same settings (docs/events.md)',
    );
  }
  await updateSetting<NotifyUrlPolicy>(d.db, SETTING, now, () => ({
    allowLoopback: mine.allowLoopback,
    allowPrivateTargets: mine.allowPrivateTargets,
  }));
}
