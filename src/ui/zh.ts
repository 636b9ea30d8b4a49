/** zh-CN texts of the shared pieces (src/ui), by their English text (src/ui/i18n.ts). */
export const SHARED_ZH: Record<string, string> = {
  'Loading…': '加载中…',
  'Nothing to show.': '暂无内容。',
  '{hour}:00 — {orders} orders, {paid} paid': '{hour}:00 — {orders} 笔订单，{paid} 笔已支付',
  'Orders per hour over the last 24 hours': '最近 24 小时每小时订单数',
  'From (day)': '起始日期',
  'To (day, inclusive)': '截止日期（含当日）',
};
