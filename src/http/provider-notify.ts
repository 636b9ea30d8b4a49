/**
 * The provider-notification surface: where each configured provider posts its signed notices,
 * `/api/provider/v1/notifications/{provider}`. The body (64 KB at most) is verified by that
 * provider's adapter before anything changes; the answer is in the provider's own format (its
 * `notificationAck`): acknowledged when the notice was applied or is safely ignored, refused when
 * it did not verify (the provider sends it again), and a fault is never acknowledged.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { type PaymentProvider, ProviderNotificationError } from '../providers/provider.ts';
import type { Services } from '../services.ts';
import { handleProviderNotification } from '../usecases/notifications.ts';

export const NOTIFICATION_LIMIT_BYTES = 64 * 1024;

function ack(reply: FastifyReply, provider: PaymentProvider, ok: boolean, message?: string, status?: number): FastifyReply {
  const a = provider.notificationAck(ok, message);
  return reply
    .code(status ?? a.status)
    .type(a.contentType)
    .send(a.body);
}

export async function providerNotifyPlugin(scope: FastifyInstance, opts: { svc: Services }): Promise<void> {
  const { svc } = opts;
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: NOTIFICATION_LIMIT_BYTES }, (_req, body, done) => done(null, body));
  for (const provider of svc.providers.all()) {
    scope.register(async (one) => {
      // Refused before the handler (a body over 64 KB, a malformed Content-Length): the provider's
      // own refusal too, so that it sends the notice again (or gives up on a body it cannot send).
      one.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
        if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return ack(reply, provider, false, 'the body is over 64 KB', 413);
        if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
          return ack(reply, provider, false, err.message, 400);
        }
        req.log.error({ err }, 'provider notification failed');
        return ack(reply, provider, false, undefined, 503);
      });
      one.post(`/${provider.name}`, async (req, reply) => {
        try {
          const outcome = await handleProviderNotification(svc, provider, (req.body as Buffer | undefined) ?? Buffer.alloc(0), req.headers);
          // A verified notice about nothing of ours: every payment and refund is recorded before
          // the provider hears of it, so it is not ours (another system on the same merchant
          // account); acknowledged so that the provider stops sending it.
          if (outcome === 'UNKNOWN_SUBJECT')
            req.log.warn({ provider: provider.name }, 'verified provider notice about an unknown payment or refund; acknowledged');
          return ack(reply, provider, true);
        } catch (err) {
          if (err instanceof ProviderNotificationError) return ack(reply, provider, false, err.message);
          req.log.error({ err }, 'provider notification failed');
          return ack(reply, provider, false, undefined, 503);
        }
      });
    });
  }
}
