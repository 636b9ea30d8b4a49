/**
 * WeChat Pay's trade bill (交易账单) of type ALL, read into statement lines
 * (pay.weixin.qq.com/docs/merchant/products/bill-download/format-trade.html, "交易账单文件格式说明";
 * docs/providers-wechatpay.md, "Statements").
 *
 * The file: a header of column names; one row per payment (交易状态 SUCCESS; REVOKED when revoked
 * after payment) and per refund accepted that day (交易状态 REFUND, with 退款状态); then a summary
 * header (总交易单数,...) and its one row. Every field of the rows is written with a leading back
 * quote (`` ` ``, so that a spreadsheet keeps long numbers as text) and fields are separated by
 * commas; amounts are yuan with two decimals. Columns are found by name.
 */
import type { ProviderStatementLine } from '../provider.ts';
import { beijingTime, billFen, columnsOf, malformed } from '../statement-parsing.ts';

const P = 'wechatpay';
const REQUIRED = ['交易时间', '微信订单号', '商户订单号', '交易状态'] as const;
const OPTIONAL = ['订单金额', '应结订单金额', '微信退款单号', '商户退款单号', '退款金额', '申请退款金额', '退款状态'] as const;
type Column = (typeof REQUIRED)[number] | (typeof OPTIONAL)[number];

/** 退款状态 in our terms. */
const REFUND_STATE: Record<string, string> = { SUCCESS: 'SUCCEEDED', PROCESSING: 'PENDING', REFUNDCLOSE: 'FAILED', CLOSED: 'FAILED' };

/** A row's fields: each written `` `value ``, separated by commas (a comma inside a value stays, since it is not followed by `` ` ``). */
function fields(line: string): string[] {
  if (!line.startsWith('`')) throw malformed(P, 'a row does not start with a back quote');
  return line.slice(1).split(',`');
}

/** The statement lines of an ALL trade bill, row by row. */
export async function* parseWechatTradeBill(lines: AsyncIterable<string>): AsyncGenerator<ProviderStatementLine> {
  let columns: Record<Column, number> | null = null;
  let width = 0;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    if (columns === null) {
      const header = line.split(',').map((h) => h.trim());
      columns = columnsOf<Column>(P, header, REQUIRED, OPTIONAL);
      width = header.length;
      continue;
    }
    // The summary: its header, then its one row. Nothing after it is a row.
    if (line.startsWith('总交易单数')) return;
    const f = fields(line);
    if (f.length !== width) throw malformed(P, `a row has ${f.length} fields, the header ${width}`);
    const col = (name: Column): string => (columns![name] === -1 ? '' : f[columns![name]]!.trim());
    const status = col('交易状态');
    const at = beijingTime(col('交易时间'));
    if (at === null) throw malformed(P, `a row's 交易时间 is not a time: ${JSON.stringify(col('交易时间'))}`);
    if (status === 'REFUND') {
      const refundState = col('退款状态');
      yield {
        kind: 'REFUND',
        subjectId: col('商户退款单号'),
        providerRef: col('微信退款单号') || null,
        amountFen: billFen(P, col('申请退款金额') || col('退款金额')),
        state: REFUND_STATE[refundState] ?? refundState,
        at,
      };
    } else {
      yield {
        kind: 'PAYMENT',
        subjectId: col('商户订单号'),
        providerRef: col('微信订单号') || null,
        amountFen: billFen(P, col('订单金额') || col('应结订单金额')),
        state: status === 'SUCCESS' ? 'PAID' : status,
        at,
      };
    }
  }
}
